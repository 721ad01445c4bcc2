package io.rebound.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebound.client.OutgoingMessage;
import io.rebound.client.Publisher;
import io.rebound.client.ReboundClient;
import io.rebound.client.ReboundException;
import io.rebound.client.UnconfirmedException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import rebound.v1.AdminOuterClass.RoutingType;

/** What the client says when the broker goes away under it. */
@ExtendWith(Broker.Required.class)
@Timeout(90)
class FailureTest {
    @Test
    void sendsInFlightWhenTheBrokerDiesFailAsMayOrMayNotHaveBeenStored() throws Exception {
        try (Broker broker = Broker.start(""); ReboundClient client = ReboundClient.connect(broker.url())) {
            client.admin().createQueue("crash", "crash", RoutingType.ROUTING_TYPE_ANYCAST, true);
            List<CompletableFuture<Long>> sends = new ArrayList<>();
            AtomicInteger done = new AtomicInteger();
            try (Publisher publisher = client.publisher()) {
                for (int i = 0; i < 100; i++) {
                    sends.add(publisher.send(new OutgoingMessage("crash", new byte[1024])));
                }
                CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
                // Keep frames in flight while the broker dies.
                Thread sender = new Thread(() -> {
                    for (int i = 0; i < 20_000; i++) {
                        CompletableFuture<Long> f = publisher.send(new OutgoingMessage("crash", new byte[1024]));
                        f.whenComplete((id, error) -> done.incrementAndGet());
                        synchronized (sends) {
                            sends.add(f);
                        }
                    }
                });
                sender.start();
                while (done.get() < 1_000) {
                    Thread.sleep(5);
                }
                broker.kill9();
                sender.join(60_000);
            }
            int confirmed = 0;
            int unconfirmed = 0;
            for (CompletableFuture<Long> send : sends) {
                try {
                    send.get(30, TimeUnit.SECONDS);
                    confirmed++;
                } catch (ExecutionException e) {
                    assertTrue(e.getCause() instanceof ReboundException, "a typed error: " + e.getCause());
                    if (e.getCause() instanceof UnconfirmedException) {
                        unconfirmed++;
                        assertTrue(e.getCause().getMessage().contains("may or may not have been stored"), e.getCause().getMessage());
                    }
                }
            }
            assertTrue(unconfirmed > 0, "some sends were in flight when the broker died (" + confirmed + " confirmed)");
            assertTrue(confirmed >= 1_000);
            // Every confirmed durable message survived the kill -9.
            broker.restartOnSamePort();
            long stored;
            try (ReboundClient again = ReboundClient.connect(broker.url())) {
                stored = again.admin().queue("crash").getMessages();
            }
            assertTrue(stored >= confirmed, stored + " stored, " + confirmed + " confirmed");
            assertTrue(stored <= confirmed + unconfirmed);
        }
    }
}
