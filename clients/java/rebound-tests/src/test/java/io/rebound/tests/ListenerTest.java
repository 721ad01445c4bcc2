package io.rebound.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebound.client.Consumer;
import io.rebound.client.DependencyDownException;
import io.rebound.client.Delivery;
import io.rebound.client.Listener;
import io.rebound.client.OutgoingMessage;
import io.rebound.client.PermanentFailureException;
import io.rebound.client.ReboundClient;
import io.rebound.client.TemporarilyUnavailableException;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import rebound.v1.AdminOuterClass.RoutingType;

/** The listener container: outcomes, concurrency, transactions, graceful stop, and a broker restart under it. */
@ExtendWith(Broker.Required.class)
@Timeout(90)
class ListenerTest {
    static Broker broker;
    static ReboundClient client;

    @BeforeAll
    static void start() {
        broker = Broker.start(ClientTest.CONFIG);
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

    static String queue(TestInfo test) {
        String name = "listener." + test.getTestMethod().orElseThrow().getName();
        client.admin().createQueue(name, name, RoutingType.ROUTING_TYPE_ANYCAST, true);
        return name;
    }

    static void await(String what, BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(20);
        }
    }

    @Test
    void handlerOutcomesMapToSettlements(TestInfo test) throws Exception {
        String q = queue(test);
        Map<String, Integer> attempts = new ConcurrentHashMap<>();
        for (String body : new String[] {"ok", "temporary", "permanent", "boom"}) {
            client.send(new OutgoingMessage(q, body));
        }
        Listener listener = Listener.builder(client, q).start(incoming -> {
            String body = incoming.message().text();
            int attempt = attempts.merge(body, 1, Integer::sum);
            assertEquals(attempt, incoming.deliveryCount());
            switch (body) {
                case "temporary" -> {
                    if (attempt == 1) {
                        throw new TemporarilyUnavailableException("try later", Duration.ofMillis(200));
                    }
                }
                case "permanent" -> throw new PermanentFailureException("malformed order");
                case "boom" -> {
                    if (attempt == 1) {
                        throw new IllegalStateException("a bug");
                    }
                }
                default -> { }
            }
        });
        await("every outcome", () -> listener.stats().acked() == 3);
        Listener.Stats stats = listener.stop();
        assertEquals(new Listener.Stats(3, 1, 1, 1, 0, 0), stats);
        assertEquals(Map.of("ok", 1, "temporary", 2, "permanent", 1, "boom", 2), attempts);
        var dead = client.admin().browse("DLQ", 10, "_AMQ_ORIG_QUEUE = '" + q + "'");
        assertEquals(1, dead.size());
        assertEquals("rejected: malformed order", dead.get(0).message().property("_REBOUND_DEAD_LETTER_REASON"));
    }

    @Test
    void dependencyDownPausesTheQueue(TestInfo test) throws Exception {
        String q = queue(test);
        client.send(new OutgoingMessage(q, "needs the database"));
        Listener listener = Listener.builder(client, q).start(incoming -> {
            throw new DependencyDownException("database down", Duration.ofSeconds(30));
        });
        await("the queue to pause", () -> client.admin().queue(q).getOutage());
        assertEquals(1, listener.stop().retried());
    }

    @Test
    void handlersRunConcurrently(TestInfo test) throws Exception {
        String q = queue(test);
        int concurrency = 4;
        for (int i = 0; i < concurrency * 3; i++) {
            client.send(new OutgoingMessage(q, "m" + i));
        }
        AtomicInteger running = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        CountDownLatch together = new CountDownLatch(concurrency);
        Listener listener = Listener.builder(client, q).concurrency(concurrency).start(incoming -> {
            most.accumulateAndGet(running.incrementAndGet(), Math::max);
            together.countDown();
            together.await(10, TimeUnit.SECONDS);
            running.decrementAndGet();
        });
        await("every message", () -> listener.stats().acked() == concurrency * 3);
        listener.stop();
        assertEquals(concurrency, most.get(), "up to the concurrency, never more");
    }

    @Test
    void aTransactedHandlerSendsOnlyWhenItSucceeds(TestInfo test) throws Exception {
        String q = queue(test);
        String out = q + ".out";
        client.admin().createQueue(out, out, RoutingType.ROUTING_TYPE_ANYCAST, true);
        client.send(new OutgoingMessage(q, "order"));
        Listener listener = Listener.builder(client, q).transacted(true).start(incoming -> {
            incoming.transaction().orElseThrow().send(new OutgoingMessage(out, "attempt " + incoming.deliveryCount()));
            if (incoming.deliveryCount() == 1) {
                throw new TemporarilyUnavailableException("first attempt fails");
            }
        });
        await("the commit", () -> listener.stats().acked() == 1);
        listener.stop();
        var sent = client.admin().browse(out, 10);
        assertEquals(1, sent.size(), "the failed attempt's send was rolled back");
        assertEquals("attempt 2", sent.get(0).message().text());
        assertEquals(0, client.admin().queue(q).getMessages());
    }

    @Test
    void aGracefulStopReleasesWhatWasNotHandled(TestInfo test) throws Exception {
        String q = queue(test);
        for (int i = 0; i < 5; i++) {
            client.send(new OutgoingMessage(q, "m" + i));
        }
        CountDownLatch started = new CountDownLatch(1);
        Listener listener = Listener.builder(client, q).concurrency(2).start(incoming -> {
            started.countDown();
            Thread.sleep(300);
        });
        assertTrue(started.await(10, TimeUnit.SECONDS));
        Listener.Stats stats = listener.stop();
        assertTrue(stats.acked() >= 1, "the running handlers finished and were acked: " + stats);
        long left = 5 - stats.acked();
        assertEquals(left, client.admin().queue(q).getMessages());
        try (Consumer consumer = client.consumer(q).open()) {
            for (int i = 0; i < left; i++) {
                Delivery d = consumer.next(Duration.ofSeconds(5));
                assertEquals(1, d.deliveryCount(), "a graceful stop does not count an attempt");
                consumer.ack(d.id());
            }
        }
    }

    @Test
    void aBrokerRestartUnderARunningListenerLosesNothing(TestInfo test) throws Exception {
        String q = queue(test);
        int before = 40;
        int after = 40;
        for (int i = 0; i < before; i++) {
            client.send(new OutgoingMessage(q, "m" + i));
        }
        Set<String> handled = ConcurrentHashMap.newKeySet();
        Listener listener = Listener.builder(client, q).concurrency(2).start(incoming -> {
            Thread.sleep(20);
            handled.add(incoming.message().text());
        });
        await("a few messages", () -> handled.size() >= 5);
        broker.restartOnSamePort();
        client.resetConnectBackoff();
        try (ReboundClient again = ReboundClient.connect(broker.url())) {
            for (int i = before; i < before + after; i++) {
                again.send(new OutgoingMessage(q, "m" + i));
            }
            await("every message, sent before and after the restart", () -> handled.size() == before + after);
            await("every ack", () -> again.admin().queue(q).getMessages() == 0);
        }
        Listener.Stats stats = listener.stop();
        assertTrue(stats.reconnects() >= 1, "the listener reconnected: " + stats);
    }
}
