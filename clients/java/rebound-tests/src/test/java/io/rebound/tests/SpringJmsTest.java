package io.rebound.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebound.client.ReboundClient;
import io.rebound.jms.ReboundConnectionFactory;
import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.jms.core.JmsTemplate;
import org.springframework.jms.listener.DefaultMessageListenerContainer;

/** Spring JMS on rebound's provider: JmsTemplate, and the MDB-rollback scenario through a transacted DefaultMessageListenerContainer. */
@ExtendWith(Broker.Required.class)
@Timeout(90)
class SpringJmsTest {
    static final String CONFIG = """
            persist-delivery-count-before-delivery = true

            [[address-settings]]
            match = "#"
            dead-letter-address = "DLQ"
            max-delivery-attempts = 3
            redelivery-delay = 300
            redelivery-delay-multiplier = 2.0

            [[addresses]]
            name = "DLQ"
              [[addresses.queues]]
              name = "DLQ"
            """;

    static Broker broker;
    static ReboundConnectionFactory factory;

    @BeforeAll
    static void start() {
        broker = Broker.start(CONFIG);
        factory = new ReboundConnectionFactory(broker.url());
    }

    @AfterAll
    static void stop() {
        if (broker != null) {
            broker.close();
        }
    }

    @Test
    void jmsTemplateSendsReceivesAndBrowses() {
        JmsTemplate template = new JmsTemplate(factory);
        template.setReceiveTimeout(5_000);
        template.convertAndSend("spring.template", "hello", m -> {
            m.setStringProperty("tenant", "acme");
            return m;
        });
        template.convertAndSend("spring.template", Map.of("order", 42L, "item", "book"));

        int browsed = template.browse("spring.template", (session, browser) -> Collections.list(browser.getEnumeration()).size());
        assertEquals(2, browsed);
        String tenant = template.browseSelected("spring.template", "tenant = 'acme'",
                (session, browser) -> ((Message) browser.getEnumeration().nextElement()).getStringProperty("tenant"));
        assertEquals("acme", tenant);

        Message text = template.receive("spring.template");
        assertInstanceOf(TextMessage.class, text);
        assertEquals("hello", textOf(text));
        @SuppressWarnings("unchecked")
        Map<String, Object> map = (Map<String, Object>) template.receiveAndConvert("spring.template");
        assertEquals(Map.of("order", 42L, "item", "book"), map);
        assertNull(template.receiveAndConvert("spring.template"), "both were acknowledged");
    }

    private static String textOf(Message message) {
        try {
            return ((TextMessage) message).getText();
        } catch (JMSException e) {
            throw new AssertionError(e);
        }
    }

    /**
     * The seed's MDB-rollback scenario: a transacted listener that always throws. Each rollback
     * returns the message after the redelivery delay (300 ms, then 600 ms: multiplier 2), and after
     * max-delivery-attempts (3) it is on the DLQ with its origin.
     */
    @Test
    void aTransactedListenerThatThrowsIsRedeliveredWithBackoffThenDeadLettered() throws Exception {
        List<long[]> attempts = Collections.synchronizedList(new ArrayList<>());
        DefaultMessageListenerContainer container = new DefaultMessageListenerContainer();
        container.setConnectionFactory(factory);
        container.setDestinationName("spring.mdb");
        container.setSessionTransacted(true);
        container.setReceiveTimeout(100);
        // The failures are the point of the test: the attempts are recorded below, not logged.
        container.setErrorHandler(failure -> { });
        container.setMessageListener((jakarta.jms.MessageListener) message -> {
            try {
                attempts.add(new long[] {System.nanoTime(), message.getIntProperty("JMSXDeliveryCount")});
            } catch (JMSException e) {
                throw new IllegalStateException(e);
            }
            throw new IllegalStateException("the order service is broken");
        });
        container.afterPropertiesSet();
        container.start();
        try {
            new JmsTemplate(factory).convertAndSend("spring.mdb", "order 1");
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (attempts.size() < 3 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
        } finally {
            container.stop();
            container.shutdown();
        }
        assertEquals(3, attempts.size(), "max-delivery-attempts deliveries");
        for (int i = 0; i < 3; i++) {
            assertEquals(i + 1, attempts.get(i)[1], "JMSXDeliveryCount of attempt " + (i + 1));
        }
        long firstGapMs = (attempts.get(1)[0] - attempts.get(0)[0]) / 1_000_000;
        long secondGapMs = (attempts.get(2)[0] - attempts.get(1)[0]) / 1_000_000;
        assertTrue(firstGapMs >= 250, "the redelivery delay: " + firstGapMs + " ms");
        assertTrue(secondGapMs >= 550, "the delay times the multiplier: " + secondGapMs + " ms");

        try (Connection connection = factory.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer dlq = session.createConsumer(session.createQueue("DLQ"), "_AMQ_ORIG_QUEUE = 'spring.mdb'");
            TextMessage dead = (TextMessage) dlq.receive(5_000);
            assertNotNull(dead, "the message is on the DLQ");
            assertEquals("order 1", dead.getText());
            assertEquals("spring.mdb", dead.getStringProperty("_AMQ_ORIG_ADDRESS"));
            assertEquals("spring.mdb", dead.getStringProperty("_AMQ_ORIG_QUEUE"));
            assertEquals("max-delivery-attempts", dead.getStringProperty("_REBOUND_DEAD_LETTER_REASON"));
        }
    }

    /** A broker restart under a running transacted container: it reconnects, and every message sent before and after is processed, none lost. */
    @Test
    void aContainerReconnectsAfterABrokerRestartAndLosesNothing() throws Exception {
        try (Broker restarting = Broker.start(CONFIG)) {
            ReboundConnectionFactory cf = new ReboundConnectionFactory(restarting.url());
            JmsTemplate template = new JmsTemplate(cf);
            Set<String> handled = ConcurrentHashMap.newKeySet();
            DefaultMessageListenerContainer container = new DefaultMessageListenerContainer();
            container.setConnectionFactory(cf);
            container.setDestinationName("spring.restart");
            container.setSessionTransacted(true);
            container.setReceiveTimeout(100);
            container.setRecoveryInterval(200);
            container.setMessageListener((jakarta.jms.MessageListener) message -> {
                try {
                    handled.add(((TextMessage) message).getText());
                } catch (JMSException e) {
                    throw new IllegalStateException(e);
                }
            });
            container.afterPropertiesSet();
            container.start();
            try {
                for (int i = 0; i < 20; i++) {
                    template.convertAndSend("spring.restart", "before " + i);
                }
                awaitSize(handled, 5);
                restarting.restartOnSamePort();
                for (int i = 0; i < 20; i++) {
                    template.convertAndSend("spring.restart", "after " + i);
                }
                awaitSize(handled, 40);
            } finally {
                container.stop();
                container.shutdown();
            }
            try (ReboundClient client = ReboundClient.connect(restarting.url())) {
                assertEquals(0, client.admin().queue("spring.restart").getMessages(), "every message was committed");
            }
        }
    }

    private static void awaitSize(Set<String> handled, int size) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (handled.size() < size) {
            assertTrue(System.nanoTime() < deadline, "only " + handled.size() + " of " + size + " handled: " + handled);
            Thread.sleep(20);
        }
    }
}
