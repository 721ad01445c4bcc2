package io.rebound.tests.parity;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebound.tests.Broker;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.InvalidSelectorException;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * One JMS suite, two brokers: every scenario runs unchanged against rebound (through
 * {@code rebound-jms}) and against a real Apache Artemis (through Artemis's own Jakarta client),
 * both configured with {@link #CONFIG}. Where docs/configuration.md says rebound differs from Artemis on
 * purpose, the scenario asserts each broker's own behaviour ({@link Difference}).
 * {@code bench/artemis/artemis.sh} fetches and runs Artemis; without it the Artemis half fails
 * under {@code CI=true} and is skipped with the reason otherwise.
 */
@ExtendWith(Broker.Required.class)
// Generous: a broker starts in the first test on it (Artemis: fetched too, the first time).
@Timeout(300)
class ParityTest {
    /** The one config of both brokers (artemis.sh turns it into Artemis's address settings). */
    static final String CONFIG = """
            persist-delivery-count-before-delivery = true

            [[address-settings]]
            match = "#"
            dead-letter-address = "DLQ"
            expiry-address = "ExpiryQueue"
            max-delivery-attempts = 10

            [[address-settings]]
            match = "parity.redelivery.#"
            redelivery-delay = 200
            redelivery-delay-multiplier = 2.0
            max-redelivery-delay = 800

            [[address-settings]]
            match = "parity.slow-redelivery.#"
            redelivery-delay = 3000

            [[address-settings]]
            match = "parity.dla.#"
            dead-letter-address = "parity.dead"
            max-delivery-attempts = 3

            [[address-settings]]
            match = "parity.expiry.#"
            expiry-address = "parity.expired"

            [[addresses]]
            name = "DLQ"
              [[addresses.queues]]
              name = "DLQ"

            [[addresses]]
            name = "ExpiryQueue"
              [[addresses.queues]]
              name = "ExpiryQueue"

            [[addresses]]
            name = "parity.dead"
              [[addresses.queues]]
              name = "parity.dead"

            [[addresses]]
            name = "parity.expired"
              [[addresses.queues]]
              name = "parity.expired"
            """;

    private static final long WAIT_MS = 5_000;

    @AfterAll
    static void stopBrokers() {
        Target.closeAll();
    }

    private static Connection connect(Target target) throws JMSException {
        Connection connection = target.connectionFactory().createConnection();
        connection.start();
        return connection;
    }

    private static String text(Message message) throws JMSException {
        assertNotNull(message, "a message within " + WAIT_MS + " ms");
        return ((TextMessage) message).getText();
    }

    private static long millisSince(long nanos) {
        return (System.nanoTime() - nanos) / 1_000_000;
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void redeliveryDelayGrowsByTheMultiplierUpToTheCap(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session tx = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue q = tx.createQueue("parity.redelivery.timing");
            tx.createProducer(q).send(tx.createTextMessage("retry me"));
            tx.commit();
            MessageConsumer consumer = tx.createConsumer(q);
            assertEquals("retry me", text(consumer.receive(WAIT_MS)));
            List<Long> gaps = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                long rolledBackAt = System.nanoTime();
                tx.rollback();
                Message again = consumer.receive(WAIT_MS);
                gaps.add(millisSince(rolledBackAt));
                assertEquals(i + 2, again.getIntProperty("JMSXDeliveryCount"));
            }
            tx.commit();
            // redelivery-delay × multiplier^(n−1), capped by max-redelivery-delay; late by at most 1 s.
            long[] expected = {200, 400, 800, 800};
            for (int i = 0; i < expected.length; i++) {
                long gap = gaps.get(i);
                assertTrue(gap >= expected[i] - 20 && gap <= expected[i] + 1_000, "redelivery " + (i + 1) + " after " + gaps + " ms, expected " + List.of(200, 400, 800, 800));
            }
        }
    }

    /** docs/configuration.md: "The redelivery delay also applies when a consumer's connection dies (Artemis skips it for non-transacted consumers)". */
    @ParameterizedTest
    @EnumSource(Target.class)
    void aMessageHeldByAConsumerWhoseConnectionDies(Target target) throws Exception {
        try (Connection survivor = connect(target); Proxy proxy = new Proxy(target.running())) {
            Session session = survivor.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.slow-redelivery.abandoned");
            session.createProducer(q).send(session.createTextMessage("held"));
            Connection doomed = target.factory(proxy.address()).createConnection();
            doomed.start();
            Message held = doomed.createSession(false, Session.CLIENT_ACKNOWLEDGE).createConsumer(q).receive(WAIT_MS);
            assertEquals("held", text(held));
            long cutAt = System.nanoTime();
            proxy.cut();
            Message again = session.createConsumer(q).receive(10_000);
            long after = millisSince(cutAt);
            assertEquals("held", text(again));
            assertTrue(again.getJMSRedelivered());
            if (target.follows(Difference.DELAY_WHEN_A_CONSUMER_DIES)) {
                assertTrue(after >= 2_900, "after the redelivery delay of 3 s: " + after + " ms");
            } else {
                assertTrue(after < 2_900, "at once, without the redelivery delay: " + after + " ms");
            }
            try {
                doomed.close();
            } catch (JMSException e) {
                // Its connection is gone.
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void maxDeliveryAttemptsMovesTheMessageToItsDeadLetterAddress(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session tx = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue q = tx.createQueue("parity.dla.orders");
            TextMessage poison = tx.createTextMessage("poison");
            poison.setStringProperty("tenant", "acme");
            tx.createProducer(q).send(poison);
            tx.commit();
            MessageConsumer consumer = tx.createConsumer(q);
            for (int attempt = 1; attempt <= 3; attempt++) {
                Message m = consumer.receive(WAIT_MS);
                assertEquals("poison", text(m));
                assertEquals(attempt, m.getIntProperty("JMSXDeliveryCount"));
                tx.rollback();
            }
            assertNull(consumer.receive(500), "dead-lettered after max-delivery-attempts = 3");
            Message dead = tx.createConsumer(tx.createQueue("parity.dead")).receive(WAIT_MS);
            assertEquals("poison", text(dead));
            assertEquals("acme", dead.getStringProperty("tenant"));
            assertEquals("parity.dla.orders", dead.getStringProperty("_AMQ_ORIG_ADDRESS"));
            assertEquals("parity.dla.orders", dead.getStringProperty("_AMQ_ORIG_QUEUE"));
            tx.commit();
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void deliveryCountAndRedeliveredAfterRollback(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session tx = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue q = tx.createQueue("parity.count.rollback");
            tx.createProducer(q).send(tx.createTextMessage("m"));
            tx.commit();
            MessageConsumer consumer = tx.createConsumer(q);
            Message first = consumer.receive(WAIT_MS);
            assertEquals(1, first.getIntProperty("JMSXDeliveryCount"));
            assertFalse(first.getJMSRedelivered());
            tx.rollback();
            Message again = consumer.receive(WAIT_MS);
            assertEquals(2, again.getIntProperty("JMSXDeliveryCount"));
            assertTrue(again.getJMSRedelivered());
            tx.commit();
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void deliveryCountAndRedeliveredAfterRecover(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.count.recover");
            session.createProducer(q).send(session.createTextMessage("m"));
            MessageConsumer consumer = session.createConsumer(q);
            Message first = consumer.receive(WAIT_MS);
            assertEquals(1, first.getIntProperty("JMSXDeliveryCount"));
            assertFalse(first.getJMSRedelivered());
            session.recover();
            Message again = consumer.receive(WAIT_MS);
            assertEquals("m", text(again));
            assertEquals(2, again.getIntProperty("JMSXDeliveryCount"));
            assertTrue(again.getJMSRedelivered());
            again.acknowledge();
            assertNull(consumer.receive(300));
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void scheduledDeliveryByDeliveryDelayAndByProperty(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.scheduled");
            MessageProducer producer = session.createProducer(q);
            long before = System.currentTimeMillis();
            long sentAt = System.nanoTime();
            producer.setDeliveryDelay(1_000);
            producer.send(session.createTextMessage("by delay"));
            long after = System.currentTimeMillis();
            producer.setDeliveryDelay(0);
            TextMessage byProperty = session.createTextMessage("by property");
            byProperty.setLongProperty("_AMQ_SCHED_DELIVERY", before + 1_500);
            producer.send(byProperty);
            producer.send(session.createTextMessage("now"));

            MessageConsumer consumer = session.createConsumer(q);
            assertEquals("now", text(consumer.receive(WAIT_MS)), "a scheduled message does not hold up the ones behind it");
            Message delayed = consumer.receive(WAIT_MS);
            assertEquals("by delay", text(delayed));
            assertTrue(millisSince(sentAt) >= 950, "due 1 s after the send, delivered after " + millisSince(sentAt) + " ms");
            long due = delayed.getLongProperty("_AMQ_SCHED_DELIVERY");
            assertTrue(due >= before + 1_000 && due <= after + 1_000, "_AMQ_SCHED_DELIVERY " + due + " is the send time + 1 s");
            assertEquals("by property", text(consumer.receive(WAIT_MS)));
            assertTrue(System.currentTimeMillis() >= before + 1_450);
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void duplicateIdsAreStoredOnceAndFailTheirTransaction(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.duplicates");
            MessageProducer producer = session.createProducer(q);
            for (int i = 0; i < 2; i++) {
                TextMessage once = session.createTextMessage("once " + i);
                once.setStringProperty("_AMQ_DUPL_ID", "payment-17");
                producer.send(once);
            }
            Session tx = connection.createSession(true, Session.SESSION_TRANSACTED);
            MessageProducer txProducer = tx.createProducer(q);
            txProducer.send(tx.createTextMessage("fresh, in the failing transaction"));
            TextMessage again = tx.createTextMessage("duplicate in a transaction");
            again.setStringProperty("_AMQ_DUPL_ID", "payment-17");
            txProducer.send(again);
            // rebound-jms throws its subclass TransactionRolledBackException (the JMS spec's word for a
            // commit that rolled back); Artemis's client a plain JMSException.
            assertThrows(JMSException.class, tx::commit);

            MessageConsumer consumer = session.createConsumer(q);
            assertEquals("once 0", text(consumer.receive(WAIT_MS)));
            assertNull(consumer.receive(500), "the duplicate was not stored, nor anything of the failed transaction");
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void aGroupStaysWithOneConsumerInOrder(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Queue q = connection.createSession(false, Session.AUTO_ACKNOWLEDGE).createQueue("parity.groups");
            int groups = 4;
            int perGroup = 5;
            CountDownLatch all = new CountDownLatch(groups * perGroup);
            Map<String, List<Integer>> sequences = Collections.synchronizedMap(new HashMap<>());
            Map<String, Set<Integer>> owners = Collections.synchronizedMap(new HashMap<>());
            List<Session> consumerSessions = new ArrayList<>();
            for (int c = 0; c < 2; c++) {
                int consumerIndex = c;
                Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                consumerSessions.add(session);
                session.createConsumer(q).setMessageListener(m -> {
                    try {
                        String group = m.getStringProperty("JMSXGroupID");
                        sequences.computeIfAbsent(group, g -> Collections.synchronizedList(new ArrayList<>())).add(m.getIntProperty("seq"));
                        owners.computeIfAbsent(group, g -> Collections.synchronizedSet(new HashSet<>())).add(consumerIndex);
                    } catch (JMSException e) {
                        throw new IllegalStateException(e);
                    }
                    all.countDown();
                });
            }
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = session.createProducer(q);
            for (int seq = 0; seq < perGroup; seq++) {
                for (int g = 0; g < groups; g++) {
                    TextMessage m = session.createTextMessage("g" + g + "/" + seq);
                    m.setStringProperty("JMSXGroupID", "g" + g);
                    m.setIntProperty("seq", seq);
                    producer.send(m);
                }
            }
            assertTrue(all.await(30, TimeUnit.SECONDS), "all delivered: " + sequences);
            for (int g = 0; g < groups; g++) {
                assertEquals(List.of(0, 1, 2, 3, 4), sequences.get("g" + g), "group g" + g + " in send order");
                assertEquals(1, owners.get("g" + g).size(), "group g" + g + " went to one consumer: " + owners);
            }
            for (Session s : consumerSessions) {
                s.close();
            }
        }
    }

    /** docs/configuration.md: "A message group has one message delivering at a time and keeps its order across failures and redelivery delays (Artemis lets a group's later messages overtake a delayed one)". */
    @ParameterizedTest
    @EnumSource(Target.class)
    void aGroupsFailedMessageWaitingForItsRedeliveryDelay(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session tx = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue q = tx.createQueue("parity.redelivery.group");
            MessageProducer producer = tx.createProducer(q);
            producer.send(grouped(tx, "first"));
            tx.commit();
            MessageConsumer consumer = tx.createConsumer(q);
            assertEquals("first", text(consumer.receive(WAIT_MS)));
            tx.rollback();
            // While "first" waits for its redelivery delay (200 ms), the group's next message arrives.
            producer.send(grouped(tx, "second"));
            tx.commit();
            List<String> next = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                next.add(text(consumer.receive(WAIT_MS)));
                tx.commit();
            }
            if (target.follows(Difference.GROUP_ONE_AT_A_TIME)) {
                assertEquals(List.of("first", "second"), next, "the group waits for its failed message");
            } else {
                assertEquals(List.of("second", "first"), next, "the group's later message overtakes the delayed one");
            }
        }
    }

    /** docs/configuration.md: "A message group has one message delivering at a time [...]": in a transaction too, until it commits. */
    @ParameterizedTest
    @EnumSource(Target.class)
    void aGroupHasOneMessageDeliveringAtATime(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session tx = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue q = tx.createQueue("parity.groups.one-at-a-time");
            MessageProducer producer = tx.createProducer(q);
            producer.send(grouped(tx, "first"));
            producer.send(grouped(tx, "second"));
            tx.commit();
            MessageConsumer consumer = tx.createConsumer(q);
            assertEquals("first", text(consumer.receive(WAIT_MS)));
            if (target.follows(Difference.GROUP_ONE_AT_A_TIME)) {
                assertNull(consumer.receive(500), "the group's next message waits until the first is settled");
                tx.commit();
            }
            assertEquals("second", text(consumer.receive(WAIT_MS)));
            tx.commit();
        }
    }

    private static TextMessage grouped(Session session, String text) throws JMSException {
        TextMessage m = session.createTextMessage(text);
        m.setStringProperty("JMSXGroupID", "order-1");
        return m;
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void anExpiredMessageGoesToTheExpiryAddress(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.expiry.offers");
            MessageProducer producer = session.createProducer(q);
            producer.setTimeToLive(300);
            producer.send(session.createTextMessage("short-lived"));
            producer.setTimeToLive(0);
            producer.send(session.createTextMessage("long-lived"));
            Thread.sleep(600);
            MessageConsumer consumer = session.createConsumer(q);
            assertEquals("long-lived", text(consumer.receive(WAIT_MS)));
            assertNull(consumer.receive(300));
            Message expired = session.createConsumer(session.createQueue("parity.expired")).receive(WAIT_MS);
            assertEquals("short-lived", text(expired));
            assertEquals("parity.expiry.offers", expired.getStringProperty("_AMQ_ORIG_ADDRESS"));
            assertEquals("parity.expiry.offers", expired.getStringProperty("_AMQ_ORIG_QUEUE"));
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void selectorsPickAndLeaveTheRestInOrder(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.selector");
            MessageProducer producer = session.createProducer(q);
            for (String color : List.of("blue", "red", "green", "red")) {
                TextMessage m = session.createTextMessage(color);
                m.setStringProperty("color", color);
                m.setIntProperty("size", color.length());
                producer.send(m);
            }
            MessageConsumer reds = session.createConsumer(q, "color = 'red' AND size < 4");
            assertEquals("red", text(reds.receive(WAIT_MS)));
            assertEquals("red", text(reds.receive(WAIT_MS)));
            assertNull(reds.receive(300));
            reds.close();
            assertThrows(InvalidSelectorException.class, () -> session.createConsumer(q, "color = = 'x'"));
            MessageConsumer rest = session.createConsumer(q);
            assertEquals("blue", text(rest.receive(WAIT_MS)));
            assertEquals("green", text(rest.receive(WAIT_MS)));
            assertNull(rest.receive(300));
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void higherPriorityFirstAmongQueuedMessages(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.priority");
            MessageProducer producer = session.createProducer(q);
            for (int priority : List.of(1, 5, 9, 3, 7, 0, 5)) {
                producer.send(session.createTextMessage("p" + priority), DeliveryMode.PERSISTENT, priority, 0);
            }
            MessageConsumer consumer = session.createConsumer(q);
            List<Integer> order = new ArrayList<>();
            for (Message m = consumer.receive(WAIT_MS); m != null; m = consumer.receive(300)) {
                order.add(m.getJMSPriority());
            }
            assertEquals(List.of(9, 7, 5, 5, 3, 1, 0), order);
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void transactedSendsAndReceivesApplyOnCommitOnly(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session tx = connection.createSession(true, Session.SESSION_TRANSACTED);
            Session auto = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = tx.createQueue("parity.tx");
            MessageProducer producer = tx.createProducer(q);
            producer.send(tx.createTextMessage("one"));
            producer.send(tx.createTextMessage("two"));
            MessageConsumer watcher = auto.createConsumer(q);
            assertNull(watcher.receive(300), "invisible until commit");
            watcher.close();
            tx.rollback();
            producer.send(tx.createTextMessage("three"));
            tx.commit();

            MessageConsumer consumer = tx.createConsumer(q);
            assertEquals("three", text(consumer.receive(WAIT_MS)), "the rolled back sends are gone");
            tx.rollback();
            assertEquals("three", text(consumer.receive(WAIT_MS)), "a rolled back receive comes back");
            tx.commit();
            assertNull(consumer.receive(300), "a committed receive is gone");
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void aBrowserShowsWithoutConsuming(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.browse");
            MessageProducer producer = session.createProducer(q);
            for (int i = 0; i < 3; i++) {
                TextMessage m = session.createTextMessage("b" + i);
                m.setIntProperty("n", i);
                producer.send(m);
            }
            assertEquals(List.of("b0", "b1", "b2"), browse(session.createBrowser(q)));
            assertEquals(List.of("b1", "b2"), browse(session.createBrowser(q, "n >= 1")));
            MessageConsumer consumer = session.createConsumer(q);
            for (int i = 0; i < 3; i++) {
                assertEquals("b" + i, text(consumer.receive(WAIT_MS)), "still there after browsing");
            }
        }
    }

    private static List<String> browse(QueueBrowser browser) throws JMSException {
        List<String> texts = new ArrayList<>();
        for (var e = browser.getEnumeration(); e.hasMoreElements(); ) {
            texts.add(((TextMessage) e.nextElement()).getText());
        }
        browser.close();
        return texts;
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void durableAndNonDurableTopicSubscriptions(Target target) throws Exception {
        try (Connection subscriber = target.connectionFactory().createConnection(); Connection publisher = connect(target)) {
            subscriber.setClientID("parity-app");
            subscriber.start();
            Session session = subscriber.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic("parity.events");
            session.createDurableSubscriber(topic, "audit").close();
            MessageConsumer nonDurable = session.createConsumer(topic);

            Session pub = publisher.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = pub.createProducer(topic);
            producer.send(pub.createTextMessage("e1"));
            producer.send(pub.createTextMessage("e2"));

            assertEquals("e1", text(nonDurable.receive(WAIT_MS)));
            assertEquals("e2", text(nonDurable.receive(WAIT_MS)));
            nonDurable.close();
            producer.send(pub.createTextMessage("e3"));
            MessageConsumer durable = session.createDurableSubscriber(topic, "audit");
            assertEquals("e1", text(durable.receive(WAIT_MS)), "kept while the durable subscriber was away");
            assertEquals("e2", text(durable.receive(WAIT_MS)));
            assertEquals("e3", text(durable.receive(WAIT_MS)));
            durable.close();
            session.unsubscribe("audit");
            producer.send(pub.createTextMessage("e4"));
            MessageConsumer resubscribed = session.createDurableSubscriber(topic, "audit");
            assertNull(resubscribed.receive(300), "a new subscription after unsubscribe starts empty");
            resubscribed.close();
            session.unsubscribe("audit");
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void aSharedDurableSubscriptionSpreadsMessagesOverItsConsumers(Target target) throws Exception {
        try (Connection connection = connect(target)) {
            Session first = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session second = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = first.createTopic("parity.shared");
            MessageConsumer one = first.createSharedDurableConsumer(topic, "workers");
            MessageConsumer two = second.createSharedDurableConsumer(topic, "workers");
            MessageConsumer other = second.createSharedConsumer(topic, "auditors");
            MessageProducer producer = first.createProducer(topic);
            for (int i = 0; i < 10; i++) {
                producer.send(first.createTextMessage("m" + i));
            }
            Set<String> workers = new HashSet<>();
            for (MessageConsumer c : List.of(one, two)) {
                for (Message m = c.receive(1_000); m != null; m = c.receive(300)) {
                    assertTrue(workers.add(text(m)), "each message once over the subscription's consumers");
                }
            }
            assertEquals(10, workers.size());
            Set<String> auditors = new HashSet<>();
            for (Message m = other.receive(WAIT_MS); m != null; m = other.receive(300)) {
                auditors.add(text(m));
            }
            assertEquals(workers, auditors, "every subscription gets every message");
            one.close();
            two.close();
            first.unsubscribe("workers");
        }
    }

    @ParameterizedTest
    @EnumSource(Target.class)
    void deliveryCountsAndDuplicateIdsSurviveAKill9(Target target) throws Exception {
        Connection crashed = connect(target);
        try {
            Session session = crashed.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.crash");
            TextMessage survivor = session.createTextMessage("survivor");
            survivor.setStringProperty("_AMQ_DUPL_ID", "crash-1");
            session.createProducer(q).send(survivor);
            Message first = session.createConsumer(q).receive(WAIT_MS);
            assertEquals(1, first.getIntProperty("JMSXDeliveryCount"));
            target.kill9AndRestart();
        } finally {
            try {
                crashed.close();
            } catch (JMSException e) {
                // The broker this connection talked to was killed.
            }
        }
        try (Connection connection = connect(target)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = session.createQueue("parity.crash");
            TextMessage resent = session.createTextMessage("resent after the crash");
            resent.setStringProperty("_AMQ_DUPL_ID", "crash-1");
            session.createProducer(q).send(resent);
            MessageConsumer consumer = session.createConsumer(q);
            Message again = consumer.receive(WAIT_MS);
            assertEquals("survivor", text(again));
            assertEquals(2, again.getIntProperty("JMSXDeliveryCount"), "persisted before the first delivery");
            assertTrue(again.getJMSRedelivered());
            assertNull(consumer.receive(500), "the resent duplicate was recognised after the restart");
        }
    }

    /** Each {@link Difference} quotes a bullet of docs/configuration.md's "Where rebound differs from Artemis", so that the two cannot drift apart. */
    @Test
    void everyDifferenceIsListedInTheDocs() throws IOException {
        String docs = Files.readString(Path.of(System.getProperty("rebound.repo", "../.."), "docs", "configuration.md"));
        int start = docs.indexOf("### Where rebound differs from Artemis");
        assertTrue(start >= 0, "docs/configuration.md has the section");
        int next = docs.indexOf("\n#", start + 1);
        String section = docs.substring(start, next < 0 ? docs.length() : next).replaceAll("\\s+", " ");
        for (Difference difference : Difference.values()) {
            assertTrue(section.contains("- " + difference.quoted), difference + " quotes a bullet of the section: " + difference.quoted);
        }
    }
}
