package io.rebound.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebound.client.ReboundClient;
import io.rebound.jms.ReboundConnectionFactory;
import jakarta.jms.BytesMessage;
import jakarta.jms.CompletionListener;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.InvalidSelectorException;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSException;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.StreamMessage;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** The JMS provider's API against a real broker: acknowledgement modes, transactions, topics, message types and headers, JMSContext. */
@ExtendWith(Broker.Required.class)
@Timeout(60)
class JmsTest {
    static Broker broker;
    static ReboundConnectionFactory factory;
    static Connection connection;

    @BeforeAll
    static void start() throws JMSException {
        broker = Broker.start(SpringJmsTest.CONFIG);
        factory = new ReboundConnectionFactory(broker.url());
        connection = factory.createConnection();
        connection.start();
    }

    @AfterAll
    static void stop() throws JMSException {
        if (connection != null) {
            connection.close();
        }
        if (broker != null) {
            broker.close();
        }
    }

    /** A consumer holds its factory's prefetch of messages and no more: the rest stay for the queue's other consumers. */
    @Test
    void aConsumerHoldsItsPrefetchAndLeavesTheRestToOthers() throws Exception {
        ReboundConnectionFactory small = new ReboundConnectionFactory(broker.url());
        small.setPrefetch(3);
        assertThrows(IllegalArgumentException.class, () -> small.setPrefetch(0));
        try (Connection holding = small.createConnection()) {
            holding.start();
            Session session = holding.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("jms.prefetch");
            MessageConsumer idle = session.createConsumer(queue);
            MessageProducer producer = session.createProducer(queue);
            for (int i = 0; i < 10; i++) {
                producer.send(session.createTextMessage("m" + i));
            }
            Session other = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer busy = other.createConsumer(queue);
            int got = 0;
            while (busy.receive(1_000) != null) {
                got++;
            }
            assertEquals(7, got, "the idle consumer holds exactly 3");
            busy.close();
            idle.close();
        }
    }

    @Test
    void clientAcknowledgeAcknowledgesEverythingTheSessionConsumed() throws Exception {
        Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        Queue a = session.createQueue("jms.ack.a");
        Queue b = session.createQueue("jms.ack.b");
        MessageProducer producer = session.createProducer(null);
        producer.send(a, session.createTextMessage("a1"));
        producer.send(b, session.createTextMessage("b1"));
        producer.send(b, session.createTextMessage("b2"));
        MessageConsumer fromA = session.createConsumer(a);
        MessageConsumer fromB = session.createConsumer(b);
        assertNotNull(fromA.receive(5_000));
        assertNotNull(fromB.receive(5_000));
        Message last = fromB.receive(5_000);
        last.acknowledge();
        session.close();
        try (ReboundClient client = ReboundClient.connect(broker.url())) {
            assertEquals(0, client.admin().queue("jms.ack.a").getMessages(), "acknowledged through another consumer's message");
            assertEquals(0, client.admin().queue("jms.ack.b").getMessages());
        }
    }

    @Test
    void recoverRedeliversWhatWasNotAcknowledged() throws Exception {
        Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        Queue q = session.createQueue("jms.recover");
        session.createProducer(q).send(session.createTextMessage("again"));
        MessageConsumer consumer = session.createConsumer(q);
        Message first = consumer.receive(5_000);
        assertFalse(first.getJMSRedelivered());
        session.recover();
        Message again = consumer.receive(5_000);
        assertTrue(again.getJMSRedelivered());
        assertEquals(2, again.getIntProperty("JMSXDeliveryCount"));
        again.acknowledge();
        session.close();
    }

    @Test
    void aTransactedSessionSendsAndAcksOnCommitAndRedeliversOnRollback() throws Exception {
        Session tx = connection.createSession(true, Session.SESSION_TRANSACTED);
        Session auto = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = tx.createQueue("jms.tx");
        tx.createProducer(q).send(tx.createTextMessage("in tx"));
        MessageConsumer watcher = auto.createConsumer(q);
        assertNull(watcher.receive(300), "invisible until commit");
        watcher.close();
        tx.commit();
        MessageConsumer consumer = tx.createConsumer(q);
        assertEquals("in tx", ((TextMessage) consumer.receive(5_000)).getText());
        long rolledBackAt = System.nanoTime();
        tx.rollback();
        Message again = consumer.receive(5_000);
        assertTrue((System.nanoTime() - rolledBackAt) / 1_000_000 >= 250, "after the redelivery delay");
        assertEquals(2, again.getIntProperty("JMSXDeliveryCount"));
        tx.commit();
        tx.close();
        auto.close();
    }

    @Test
    void aDurableTopicSubscriptionSurvivesAConsumerRestart() throws Exception {
        try (Connection subscriber = factory.createConnection()) {
            subscriber.setClientID("orders-app");
            subscriber.start();
            Session session = subscriber.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("jms.events");
            session.createDurableSubscriber(topic, "audit").close();
            MessageConsumer nonDurable = session.createConsumer(topic);

            Session publisher = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = publisher.createProducer(publisher.createTopic("jms.events"));
            producer.send(publisher.createTextMessage("e1"));
            producer.send(publisher.createTextMessage("e2"));
            publisher.close();

            assertEquals("e1", ((TextMessage) nonDurable.receive(5_000)).getText());
            MessageConsumer durable = session.createDurableSubscriber(topic, "audit");
            assertEquals("e1", ((TextMessage) durable.receive(5_000)).getText());
            assertEquals("e2", ((TextMessage) durable.receive(5_000)).getText());
            durable.close();
            try (ReboundClient client = ReboundClient.connect(broker.url())) {
                assertEquals("jms.events", client.admin().queue("orders-app.audit").getAddress(), "named clientID.subscription, as Artemis names it");
            }
            session.unsubscribe("audit");
        }
    }

    @Test
    void aSharedSubscriptionSpreadsMessagesOverItsConsumers() throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic topic = session.createTopic("jms.shared");
        MessageConsumer one = session.createSharedDurableConsumer(topic, "workers");
        MessageConsumer two = connection.createSession(false, Session.AUTO_ACKNOWLEDGE).createSharedDurableConsumer(topic, "workers");
        MessageProducer producer = session.createProducer(topic);
        for (int i = 0; i < 10; i++) {
            producer.send(session.createTextMessage("m" + i));
        }
        Set<String> seen = ConcurrentHashMap.newKeySet();
        for (MessageConsumer c : List.of(one, two)) {
            for (Message m = c.receive(500); m != null; m = c.receive(300)) {
                assertTrue(seen.add(((TextMessage) m).getText()), "each message once");
            }
        }
        assertEquals(10, seen.size());
        session.close();
    }

    @Test
    void messageTypesAndHeadersRoundTrip() throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = session.createQueue("jms.types");
        Queue replies = session.createQueue("jms.replies");
        MessageProducer producer = session.createProducer(q);

        TextMessage text = session.createTextMessage("text");
        text.setJMSCorrelationID("corr-1");
        text.setJMSType("order");
        text.setJMSReplyTo(replies);
        text.setIntProperty("count", 7);
        text.setDoubleProperty("ratio", 0.5);
        text.setBooleanProperty("flag", true);
        text.setStringProperty("JMSXGroupID", "customer-9");
        producer.setPriority(8);
        producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
        producer.setTimeToLive(60_000);
        producer.send(text);
        assertTrue(text.getJMSMessageID().startsWith("ID:"), text.getJMSMessageID());
        producer.setPriority(4);
        producer.setDeliveryMode(DeliveryMode.PERSISTENT);
        producer.setTimeToLive(0);

        BytesMessage bytes = session.createBytesMessage();
        bytes.writeInt(42);
        bytes.writeUTF("utf");
        producer.send(bytes);
        MapMessage map = session.createMapMessage();
        map.setLong("id", 5L);
        map.setString("name", "book");
        map.setBytes("raw", new byte[] {1, 2});
        producer.send(map);
        StreamMessage stream = session.createStreamMessage();
        stream.writeString("first");
        stream.writeInt(2);
        producer.send(stream);
        producer.send(session.createMessage());

        MessageConsumer consumer = session.createConsumer(q);
        TextMessage t = (TextMessage) consumer.receive(5_000);
        assertEquals("text", t.getText());
        assertEquals(text.getJMSMessageID(), t.getJMSMessageID());
        assertEquals("corr-1", t.getJMSCorrelationID());
        assertEquals("order", t.getJMSType());
        assertEquals(replies, t.getJMSReplyTo());
        assertEquals(8, t.getJMSPriority());
        assertEquals(DeliveryMode.NON_PERSISTENT, t.getJMSDeliveryMode());
        assertTrue(t.getJMSExpiration() > System.currentTimeMillis());
        assertTrue(t.getJMSTimestamp() > 0);
        assertEquals(7, t.getIntProperty("count"));
        assertEquals(0.5, t.getDoubleProperty("ratio"));
        assertTrue(t.getBooleanProperty("flag"));
        assertEquals("customer-9", t.getStringProperty("JMSXGroupID"));
        assertEquals(1, t.getIntProperty("JMSXDeliveryCount"));
        assertFalse(t.getJMSRedelivered());
        assertEquals(q, t.getJMSDestination());

        BytesMessage b = (BytesMessage) consumer.receive(5_000);
        assertEquals(42, b.readInt());
        assertEquals("utf", b.readUTF());
        MapMessage m = (MapMessage) consumer.receive(5_000);
        assertEquals(5L, m.getLong("id"));
        assertEquals("book", m.getString("name"));
        assertArrayEquals(new byte[] {1, 2}, m.getBytes("raw"));
        StreamMessage s = (StreamMessage) consumer.receive(5_000);
        assertEquals("first", s.readString());
        assertEquals(2, s.readInt());
        Message plain = consumer.receive(5_000);
        assertFalse(plain instanceof TextMessage || plain instanceof BytesMessage);

        JMSException refused = assertThrows(JMSException.class, session::createObjectMessage);
        assertTrue(refused.getMessage().contains("not supported"), refused.getMessage());
        session.close();
    }

    @Test
    void artemisDuplicateIdAndScheduledDeliveryProperties() throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = session.createQueue("jms.artemis");
        MessageProducer producer = session.createProducer(q);
        for (int i = 0; i < 2; i++) {
            TextMessage once = session.createTextMessage("once");
            once.setStringProperty("_AMQ_DUPL_ID", "payment-17");
            producer.send(once);
        }
        TextMessage later = session.createTextMessage("later");
        later.setLongProperty("_AMQ_SCHED_DELIVERY", System.currentTimeMillis() + 1_000);
        producer.send(later);
        MessageConsumer consumer = session.createConsumer(q);
        assertEquals("once", ((TextMessage) consumer.receive(5_000)).getText());
        assertNull(consumer.receive(500), "the duplicate was not stored and the scheduled one is not due");
        assertEquals("later", ((TextMessage) consumer.receive(5_000)).getText());
        session.close();
    }

    @Test
    void selectorsAreEvaluatedByTheBroker() throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = session.createQueue("jms.selector");
        MessageProducer producer = session.createProducer(q);
        for (String color : new String[] {"blue", "red"}) {
            TextMessage m = session.createTextMessage(color);
            m.setStringProperty("color", color);
            producer.send(m);
        }
        MessageConsumer reds = session.createConsumer(q, "color = 'red'");
        assertEquals("red", ((TextMessage) reds.receive(5_000)).getText());
        assertNull(reds.receive(300));
        assertThrows(InvalidSelectorException.class, () -> session.createConsumer(q, "color = = 'x'"));
        session.close();
    }

    @Test
    void asyncSendsCompleteOnceStored() throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer producer = session.createProducer(session.createQueue("jms.async"));
        int count = 200;
        CountDownLatch done = new CountDownLatch(count);
        List<Exception> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        Set<String> ids = ConcurrentHashMap.newKeySet();
        for (int i = 0; i < count; i++) {
            producer.send(session.createTextMessage("m" + i), new CompletionListener() {
                @Override
                public void onCompletion(Message message) {
                    try {
                        ids.add(message.getJMSMessageID());
                    } catch (JMSException e) {
                        failures.add(e);
                    }
                    done.countDown();
                }

                @Override
                public void onException(Message message, Exception exception) {
                    failures.add(exception);
                    done.countDown();
                }
            });
        }
        assertTrue(done.await(30, TimeUnit.SECONDS));
        assertEquals(List.of(), failures);
        assertEquals(count, ids.size());
        try (ReboundClient client = ReboundClient.connect(broker.url())) {
            assertEquals(count, client.admin().queue("jms.async").getMessages());
        }
        session.close();
    }

    @Test
    void aListenerInAnAutoAcknowledgeSessionGetsAMessageAgainWhenItThrows() throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = session.createQueue("jms.listener");
        session.createProducer(q).send(session.createTextMessage("flaky"));
        List<Integer> counts = java.util.Collections.synchronizedList(new ArrayList<>());
        CountDownLatch acked = new CountDownLatch(2);
        session.createConsumer(q).setMessageListener(message -> {
            try {
                counts.add(message.getIntProperty("JMSXDeliveryCount"));
            } catch (JMSException e) {
                throw new IllegalStateException(e);
            }
            acked.countDown();
            if (counts.size() == 1) {
                throw new IllegalStateException("first attempt fails");
            }
        });
        assertTrue(acked.await(10, TimeUnit.SECONDS));
        assertEquals(List.of(1, 2), counts);
        session.close();
    }

    @Test
    void theSimplifiedApiSendsAndReceives() {
        try (JMSContext context = factory.createContext()) {
            Queue q = context.createQueue("jms.context");
            context.createProducer().setProperty("kind", "greeting").send(q, "hello");
            var consumer = context.createConsumer(q);
            assertEquals("hello", consumer.receiveBody(String.class, 5_000));
            assertInstanceOf(jakarta.jms.JMSRuntimeException.class,
                    assertThrows(RuntimeException.class, () -> context.createProducer().send(q, new java.util.ArrayList<String>())));
        }
    }

    @Test
    void jmsxDeliveryCountSurvivesAKill9() throws Exception {
        try (Broker crashing = Broker.start(SpringJmsTest.CONFIG)) {
            ReboundConnectionFactory cf = new ReboundConnectionFactory(crashing.url());
            try (Connection c = cf.createConnection()) {
                c.start();
                Session session = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                Queue q = session.createQueue("jms.crash");
                session.createProducer(q).send(session.createTextMessage("survivor"));
                Message first = session.createConsumer(q).receive(5_000);
                assertEquals(1, first.getIntProperty("JMSXDeliveryCount"));
                crashing.kill9();
            }
            crashing.restartOnSamePort();
            try (Connection c = cf.createConnection()) {
                c.start();
                Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Message again = session.createConsumer(session.createQueue("jms.crash")).receive(5_000);
                assertNotNull(again);
                assertEquals(2, again.getIntProperty("JMSXDeliveryCount"), "persisted before the first delivery");
                assertTrue(again.getJMSRedelivered());
            }
        }
    }
}
