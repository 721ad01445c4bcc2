package io.rebound.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.rebound.client.Admin;
import io.rebound.client.Consumer;
import io.rebound.client.Delivery;
import io.rebound.client.OutgoingMessage;
import io.rebound.client.Publisher;
import io.rebound.client.ReboundClient;
import io.rebound.client.ReboundException;
import io.rebound.client.SendResult;
import io.rebound.client.Session;
import io.rebound.client.Transaction;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;

import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import rebound.v1.AdminOuterClass.MessageState;
import rebound.v1.AdminOuterClass.RoutingType;

/** The client's capabilities against a real broker: sends, the publisher, consuming, settling, transactions, admin. */
@ExtendWith(Broker.Required.class)
@Timeout(60)
class ClientTest {
    static final String CONFIG = """
            persist-delivery-count-before-delivery = true

            [[address-settings]]
            match = "#"
            dead-letter-address = "DLQ"
            max-delivery-attempts = 3
            redelivery-delay = 100
            outage-threshold = 0

            [[addresses]]
            name = "DLQ"
              [[addresses.queues]]
              name = "DLQ"
            """;
    static final Duration WAIT = Duration.ofSeconds(5);

    static Broker broker;
    static ReboundClient client;

    @BeforeAll
    static void start() {
        broker = Broker.start(CONFIG);
        client = ReboundClient.connect(broker.url());
    }

    @AfterAll
    static void stop() {
        if (client != null) {
            client.close();
        }
        if (broker != null) {
            broker.close();
        }
    }

    /** A queue of its own for each test, on an address of the same name. */
    static String queue(TestInfo test) {
        String name = "java." + test.getTestMethod().orElseThrow().getName();
        client.admin().createQueue(name, name, RoutingType.ROUTING_TYPE_ANYCAST, true);
        return name;
    }

    @Test
    void aMessageKeepsItsBodyTypedPropertiesAndHeaders(TestInfo test) {
        String q = queue(test);
        long expiration = System.currentTimeMillis() + 600_000;
        long id = client.send(new OutgoingMessage(q, new byte[] {1, 2, 3}).property("s", "text").property("i", 42)
                .property("d", 2.5).property("b", true).property("raw", new byte[] {9}).priority(7).durable(false)
                .expirationMs(expiration).group("g1"));
        try (Consumer consumer = client.consumer(q).open()) {
            Delivery d = consumer.next(WAIT);
            assertNotNull(d);
            assertEquals(id, d.message().id());
            assertArrayEquals(new byte[] {1, 2, 3}, d.message().body());
            assertEquals("text", d.message().property("s"));
            assertEquals(42L, d.message().property("i"));
            assertEquals(2.5, d.message().property("d"));
            assertEquals(true, d.message().property("b"));
            assertArrayEquals(new byte[] {9}, (byte[]) d.message().property("raw"));
            assertEquals("g1", d.message().property("_AMQ_GROUP_ID"));
            assertEquals(7, d.message().priority());
            assertFalse(d.message().durable());
            assertEquals(expiration, d.message().expirationMs());
            assertEquals(1, d.deliveryCount());
            consumer.ack(d.id());
            assertEquals(List.of(), consumer.flush());
        }
        assertEquals(0, client.admin().queue(q).getMessages());
    }

    @Test
    void aBatchIsStoredTogetherInOrder(TestInfo test) {
        String q = queue(test);
        SendResult sent = client.sendBatch(List.of(new OutgoingMessage(q, "a"), new OutgoingMessage(q, "b"), new OutgoingMessage(q, "c")));
        assertEquals(3, sent.messageIds().size());
        assertTrue(sent.messageIds().get(0) < sent.messageIds().get(1) && sent.messageIds().get(1) < sent.messageIds().get(2));
        List<String> bodies = client.admin().browse(q, 10).stream().map(b -> b.message().text()).toList();
        assertEquals(List.of("a", "b", "c"), bodies);
    }

    @Test
    void concurrentAsyncSendsShareFramesAndEachGetsItsId(TestInfo test) throws Exception {
        String q = queue(test);
        int threads = 8;
        int perThread = 250;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<CompletableFuture<Long>> futures = java.util.Collections.synchronizedList(new ArrayList<>());
        try (Publisher publisher = client.publisher()) {
            for (int t = 0; t < threads; t++) {
                pool.execute(() -> {
                    for (int i = 0; i < perThread; i++) {
                        futures.add(publisher.send(new OutgoingMessage(q, "m" + i)));
                    }
                });
            }
            pool.shutdown();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
            CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
            Set<Long> ids = new HashSet<>();
            futures.forEach(f -> ids.add(f.join()));
            assertEquals(threads * perThread, ids.size(), "every message got its own id");
            assertTrue(publisher.framesSent() < threads * perThread, "sends were coalesced: " + publisher.framesSent() + " frames");
        }
        assertEquals(threads * perThread, client.admin().queue(q).getMessages());
    }

    @Test
    void aRefusedMessageFailsAloneAndTheStreamCarriesOn(TestInfo test) throws Exception {
        String q = queue(test);
        try (Publisher publisher = client.publisher()) {
            CompletableFuture<Long> bad = publisher.send(new OutgoingMessage(q, "x").property("_AMQ_RESERVED", "no"));
            CompletableFuture<Long> good = publisher.send(new OutgoingMessage(q, "fine"));
            Exception refused = assertThrows(Exception.class, () -> bad.get(10, TimeUnit.SECONDS));
            assertEquals(Status.Code.INVALID_ARGUMENT, ((ReboundException) refused.getCause()).code());
            assertTrue(good.get(10, TimeUnit.SECONDS) > 0);
        }
    }

    @Test
    void scheduledDeliveryWaitsForItsTime(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "later").delayMs(1500));
        List<Admin.BrowsedMessage> browsed = client.admin().browse(q, 10);
        assertEquals(MessageState.MESSAGE_STATE_SCHEDULED, browsed.get(0).state());
        assertNotNull(browsed.get(0).message().property("_AMQ_SCHED_DELIVERY"));
        try (Consumer consumer = client.consumer(q).open()) {
            assertNull(consumer.next(Duration.ofMillis(700)), "not before its time");
            Delivery d = consumer.next(WAIT);
            assertEquals("later", d.message().text());
            consumer.ack(d.id());
        }
    }

    @Test
    void aDuplicateIdIsStoredOnce(TestInfo test) {
        String q = queue(test);
        SendResult first = client.sendBatch(List.of(new OutgoingMessage(q, "once").duplicateId("order-1")));
        SendResult second = client.sendBatch(List.of(new OutgoingMessage(q, "once").duplicateId("order-1")));
        assertFalse(first.duplicate(0));
        assertTrue(second.duplicate(0));
        assertEquals(1, client.admin().queue(q).getMessages());
    }

    @Test
    void higherPriorityIsDeliveredFirst(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "low").priority(1));
        client.send(new OutgoingMessage(q, "high").priority(9));
        try (Consumer consumer = client.consumer(q).open()) {
            assertEquals("high", consumer.next(WAIT).message().text());
            assertEquals("low", consumer.next(WAIT).message().text());
        }
    }

    @Test
    void anExpiredMessageIsNotDelivered(TestInfo test) throws Exception {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "stale").expirationMs(System.currentTimeMillis() + 200));
        client.send(new OutgoingMessage(q, "fresh"));
        Thread.sleep(400);
        try (Consumer consumer = client.consumer(q).open()) {
            assertEquals("fresh", consumer.next(WAIT).message().text());
            assertNull(consumer.next(Duration.ofMillis(300)));
        }
    }

    @Test
    void selectorsAreEvaluatedByTheBroker(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "blue").property("color", "blue"));
        client.send(new OutgoingMessage(q, "red").property("color", "red").property("weight", 3));
        try (Consumer reds = client.consumer(q).filter("color = 'red' AND weight > 2").open()) {
            Delivery d = reds.next(WAIT);
            assertEquals("red", d.message().text());
            reds.ack(d.id());
            assertNull(reds.next(Duration.ofMillis(300)));
        }
        ReboundException bad = assertThrows(ReboundException.class, () -> client.consumer(q).filter("color = = 'x'").open());
        assertEquals(Status.Code.INVALID_ARGUMENT, bad.code());
    }

    @Test
    void manualCreditBoundsDeliveries(TestInfo test) {
        String q = queue(test);
        for (int i = 0; i < 5; i++) {
            client.send(new OutgoingMessage(q, "m" + i));
        }
        try (Consumer consumer = client.consumer(q).manualCredit(2).open()) {
            Delivery a = consumer.next(WAIT);
            Delivery b = consumer.next(WAIT);
            consumer.ack(a.id(), b.id());
            assertNull(consumer.next(Duration.ofMillis(300)), "no credit left: settling gives none back");
            consumer.grant(1);
            assertNotNull(consumer.next(WAIT));
            assertNull(consumer.next(Duration.ofMillis(300)));
        }
    }

    @Test
    void aNackWithRetryAfterIsRedeliveredLaterAndCounted(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "retry me"));
        try (Consumer consumer = client.consumer(q).open()) {
            Delivery first = consumer.next(WAIT);
            consumer.nackAfter(Duration.ofMillis(800), "busy", first.id());
            assertNull(consumer.next(Duration.ofMillis(500)), "not before its retry-after");
            Delivery again = consumer.next(WAIT);
            assertEquals(2, again.deliveryCount());
            assertTrue(again.redelivered());
            consumer.ack(again.id());
        }
    }

    @Test
    void releaseDoesNotCountAnAttempt(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "back"));
        try (Consumer consumer = client.consumer(q).open()) {
            consumer.release(consumer.next(WAIT).id());
            Delivery again = consumer.next(WAIT);
            assertEquals(1, again.deliveryCount());
            consumer.ack(again.id());
        }
    }

    @Test
    void deadLetteringKeepsTheReasonAndTheOriginAndRetrySendsItBack(TestInfo test) {
        String q = queue(test);
        long id = client.send(new OutgoingMessage(q, "poison"));
        try (Consumer consumer = client.consumer(q).open()) {
            consumer.deadLetter("cannot parse", consumer.next(WAIT).id());
            consumer.flush();
        }
        String selector = "_AMQ_ORIG_MESSAGE_ID = " + id;
        Admin.BrowsedMessage dead = client.admin().browse("DLQ", 10, selector).get(0);
        assertEquals(q, dead.message().property("_AMQ_ORIG_ADDRESS"));
        assertEquals(q, dead.message().property("_AMQ_ORIG_QUEUE"));
        assertEquals("rejected: cannot parse", dead.message().property("_REBOUND_DEAD_LETTER_REASON"));

        assertEquals(1, client.admin().retryMessages("DLQ", selector).getMoved());
        assertEquals(1, client.admin().queue(q).getMessages());
        assertEquals(1, client.admin().moveMessages(q, "", "DLQ"));
        assertEquals(0, client.admin().queue(q).getMessages());
    }

    @Test
    void aNackPausingTheQueuePutsItInOutageMode(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "needs the database"));
        try (Consumer consumer = client.consumer(q).open()) {
            consumer.nackPausingQueue(Duration.ofSeconds(30), "database down", consumer.next(WAIT).id());
            consumer.flush();
            assertTrue(client.admin().queue(q).getOutage(), "the queue is paused");
            assertNull(consumer.next(Duration.ofMillis(300)));
        }
    }

    @Test
    void closingAConsumerReturnsWhatItHeldWithoutCountingAnAttempt(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "held"));
        try (Consumer consumer = client.consumer(q).open()) {
            assertNotNull(consumer.next(WAIT));
        }
        try (Consumer consumer = client.consumer(q).open()) {
            assertEquals(1, consumer.next(WAIT).deliveryCount());
        }
    }

    @Test
    void transactionsCommitSendsAndAcksTogetherOrRollBack(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "in"));
        try (Session session = client.session(); Consumer consumer = client.consumer(q).open()) {
            Transaction rolledBack = session.begin();
            rolledBack.send(new OutgoingMessage(q, "discarded"));
            Delivery d = consumer.next(WAIT);
            consumer.ackIn(rolledBack, d.id());
            rolledBack.rollback();
            Delivery again = consumer.next(WAIT);
            assertEquals("in", again.message().text());
            assertEquals(2, again.deliveryCount(), "a rollback counts as a failed delivery");

            Transaction tx = session.begin();
            tx.send(new OutgoingMessage(q, "out"));
            consumer.ackIn(tx, again.id());
            assertTrue(client.admin().browse(q, 10).stream().noneMatch(b -> b.message().text().equals("out")), "the send is invisible until commit");
            Transaction.Committed committed = tx.commit();
            assertEquals(new Transaction.Committed(1, 1), committed);
            Delivery out = consumer.next(WAIT);
            assertEquals("out", out.message().text());
            consumer.ack(out.id());
        }
    }

    @Test
    void adminReportsQueueStatistics(TestInfo test) {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "one").property("n", 1));
        client.send(new OutgoingMessage(q, "two").property("n", 2));
        var info = client.admin().queue(q);
        assertEquals(2, info.getMessages());
        assertEquals(q, info.getAddress());
        assertTrue(client.admin().listQueues().stream().anyMatch(i -> i.getName().equals(q)));
        assertTrue(client.admin().listAddresses().stream().anyMatch(a -> a.getName().equals(q)));
        assertTrue(client.admin().settings(q).stream().anyMatch(v -> v.getKey().equals("max-delivery-attempts") && v.getValue().equals("3")),
                "the effective settings of the address");
        assertEquals(1, client.admin().countMessages(q, "n = 2"));
        ReboundException missing = assertThrows(ReboundException.class, () -> client.admin().queue("java.no-such-queue"));
        assertEquals(Status.Code.NOT_FOUND, missing.code());
        assertTrue(missing.getMessage().endsWith("(NOT_FOUND)"), missing.getMessage());
        client.admin().deleteAddress(q, true);
        assertEquals(Status.Code.NOT_FOUND, assertThrows(ReboundException.class, () -> client.admin().queue(q)).code(), "deleted with its address");
    }

    @Test
    void connectingToNothingFailsClearly() {
        ReboundException e = assertThrows(ReboundException.class, () -> ReboundClient.connect("http://127.0.0.1:1"));
        assertEquals(Status.Code.UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("cannot connect to http://127.0.0.1:1"), e.getMessage());
        IllegalArgumentException https = assertThrows(IllegalArgumentException.class, () -> ReboundClient.connect("https://127.0.0.1:1"));
        assertTrue(https.getMessage().contains("CA certificate"), https.getMessage());
    }

}
