package io.rebound.client;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import rebound.v1.MessagingGrpc;
import rebound.v1.MessagingOuterClass.Close;
import rebound.v1.MessagingOuterClass.ConsumeRequest;
import rebound.v1.MessagingOuterClass.ConsumeResponse;
import rebound.v1.MessagingOuterClass.Credit;
import rebound.v1.MessagingOuterClass.Outcome;
import rebound.v1.MessagingOuterClass.Settle;
import rebound.v1.MessagingOuterClass.Settled;
import rebound.v1.MessagingOuterClass.Subscribe;
import rebound.v1.MessagingOuterClass.Voided;

/**
 * A subscription to a queue (one Consume stream), from {@link ReboundClient#consumer}.
 *
 * <p>Every delivery uses one credit and the broker never has more deliveries outstanding than it
 * was granted: the initial credit, every {@link #grant}, and (with a window) one credit per
 * settled delivery. Each delivery must be settled: {@link #ack}, {@link #nack},
 * {@link #release} or {@link #deadLetter}. Settles are pipelined; {@link #flush} waits until the
 * broker has made them durable.
 *
 * <p>End it with {@link #close}: what it still holds goes back to the queue without counting as a
 * delivery attempt. A consumer whose connection breaks instead counts as a failed delivery of
 * everything it held. Thread-safe: handlers on several threads may settle through one consumer.
 *
 * <p>In a cluster the stream follows its queue from node to node; deliveries the queue's previous
 * node took back are voided: those {@link #next} has not yet returned never are (their credit is
 * granted again), and settling one it has returned reports its id unknown ({@link #flush}).
 */
public final class Consumer implements AutoCloseable {
    /** How long {@link #open} waits for the broker to confirm, and {@link #close} for it to end the stream. */
    private static final long ANSWER_TIMEOUT_MS = 30_000;

    private final Object lock = new Object();
    private final ArrayDeque<Delivery> buffered = new ArrayDeque<>();
    private final boolean replenish;
    private ClientCallStreamObserver<ConsumeRequest> requests;
    private String queue;
    private String address;
    /** Settles sent and not yet answered by a {@code Settled}. */
    private int unconfirmed;
    private final List<Long> unknown = new ArrayList<>();
    private final List<String> rejected = new ArrayList<>();
    /** Credit granted for settles the broker then refused: their deliveries still hold credit, so the window's next grants pay it back. */
    private int owed;
    /** The credit of voided deliveries dropped before {@link #next} returned them, to grant again. */
    private int regrant;
    /** Why the stream ended; {@code null} while it is open. */
    private ReboundException ended;
    private boolean closing;

    private Consumer(boolean replenish) {
        this.replenish = replenish;
    }

    static Consumer open(MessagingGrpc.MessagingStub stub, String queue, int credit, boolean replenish, String filter) {
        Consumer consumer = new Consumer(replenish);
        stub.consume(consumer.new Responses());
        Subscribe subscribe = Subscribe.newBuilder().setQueue(queue).setInitialCredit(credit).setFilter(filter).build();
        synchronized (consumer.lock) {
            consumer.requests.onNext(ConsumeRequest.newBuilder().setSubscribe(subscribe).build());
            consumer.await(() -> consumer.address != null, ANSWER_TIMEOUT_MS, "the subscription to '" + queue + "'");
        }
        return consumer;
    }

    /** The queue consumed from, as the broker named it. */
    public String queue() {
        return queue;
    }

    /** The address the queue is bound to. */
    public String address() {
        return address;
    }

    /** The next delivery, waiting as long as it takes; fails with {@link StreamClosedException} once the stream has ended. */
    public Delivery next() {
        return next(null);
    }

    /** The next delivery, or {@code null} if none arrived within {@code timeout}. */
    public Delivery next(Duration timeout) {
        synchronized (lock) {
            long deadline = timeout == null ? Long.MAX_VALUE : System.nanoTime() + timeout.toNanos();
            while (buffered.isEmpty()) {
                if (ended != null) {
                    throw ended;
                }
                if (regrant > 0 && !closing) {
                    // The application never used the voided deliveries' credit; once closing, no more are wanted.
                    grant(regrant);
                    regrant = 0;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return null;
                }
                waitOn(timeout == null ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
            return buffered.poll();
        }
    }

    /** Grants {@code credit} more deliveries. */
    public void grant(int credit) {
        request(ConsumeRequest.newBuilder().setCredit(Credit.newBuilder().setCredit(credit)).build());
    }

    /** Acknowledges deliveries: processed, the messages are removed from the queue. */
    public void ack(long... deliveryIds) {
        settle(settle(Outcome.OUTCOME_ACK, "", deliveryIds));
    }

    /** Rejects deliveries as failed: counts as an attempt; redelivered per the address settings or dead-lettered after max-delivery-attempts. */
    public void nack(String reason, long... deliveryIds) {
        settle(settle(Outcome.OUTCOME_NACK, reason, deliveryIds));
    }

    /** As {@link #nack}, redelivered after {@code retryAfter} instead of the configured delay (capped by the address's max-retry-after). */
    public void nackAfter(Duration retryAfter, String reason, long... deliveryIds) {
        settle(settle(Outcome.OUTCOME_NACK, reason, deliveryIds).setRetryAfterMs(retryAfter.toMillis()));
    }

    /**
     * As {@link #nack}, and the consumer's dependency is down: the broker pauses the whole queue for
     * {@code pause} (capped by max-outage-pause), then delivers one probe (outage mode). The attempt
     * does not count unless the address sets outage-counts-attempts.
     */
    public void nackPausingQueue(Duration pause, String reason, long... deliveryIds) {
        settle(settle(Outcome.OUTCOME_NACK, reason, deliveryIds).setPauseQueueMs(pause.toMillis()));
    }

    /** Hands deliveries back unprocessed: requeued at once, not counted as an attempt. */
    public void release(long... deliveryIds) {
        settle(settle(Outcome.OUTCOME_RELEASE, "", deliveryIds));
    }

    /** Fails deliveries permanently: straight to the dead-letter address with {@code reason}. */
    public void deadLetter(String reason, long... deliveryIds) {
        settle(settle(Outcome.OUTCOME_DEAD_LETTER, reason, deliveryIds));
    }

    /**
     * Acknowledges deliveries inside {@code transaction}: removed when it commits, returned with
     * their delivery count incremented if it rolls back. Waits, as {@link #flush} does, until the
     * broker has taken them into the transaction, and returns what it returns.
     */
    public List<Long> ackIn(Transaction transaction, long... deliveryIds) {
        settle(settle(Outcome.OUTCOME_ACK, "", deliveryIds).setTransactionId(transaction.id()));
        return flush();
    }

    /**
     * Waits until every settle sent so far is durable; returns the delivery ids the broker reported
     * unknown (already settled, or never delivered on this stream) since the previous flush. Fails
     * with {@link SettleRejectedException} if the broker could not apply one of them.
     */
    public List<Long> flush() {
        synchronized (lock) {
            await(() -> unconfirmed == 0, 0, "settle confirmations");
            if (!rejected.isEmpty()) {
                String why = String.join("; ", rejected);
                rejected.clear();
                throw new SettleRejectedException(why);
            }
            List<Long> result = List.copyOf(unknown);
            unknown.clear();
            return result;
        }
    }

    /**
     * Ends the subscription gracefully: stops deliveries, flushes, and waits for the broker to end
     * the stream. Every delivery still unsettled goes back to the queue at once without counting as
     * a delivery attempt. Does nothing on a consumer whose stream already ended.
     */
    @Override
    public void close() {
        synchronized (lock) {
            if (ended != null || closing) {
                return;
            }
            closing = true;
            requests.onNext(ConsumeRequest.newBuilder().setClose(Close.getDefaultInstance()).build());
            try {
                await(() -> unconfirmed == 0, ANSWER_TIMEOUT_MS, "settle confirmations");
                requests.onCompleted();
                await(() -> false, ANSWER_TIMEOUT_MS, "the end of the stream");
            } catch (StreamClosedException expected) {
                // The broker ended the stream: the graceful end.
            } finally {
                if (ended == null) {
                    requests.cancel("consumer closed", null);
                }
            }
        }
    }

    private static Settle.Builder settle(Outcome outcome, String reason, long... deliveryIds) {
        Settle.Builder settle = Settle.newBuilder().setOutcome(outcome).setReason(reason == null ? "" : reason);
        for (long id : deliveryIds) {
            settle.addDeliveryIds(id);
        }
        return settle;
    }

    private void settle(Settle.Builder settle) {
        if (settle.getDeliveryIdsCount() == 0) {
            return;
        }
        synchronized (lock) {
            request(ConsumeRequest.newBuilder().setSettle(settle).build());
            unconfirmed++;
            if (replenish) {
                // Granted at once, so the window never waits for the settle's fsync.
                int settled = settle.getDeliveryIdsCount();
                int paid = Math.min(settled, owed);
                owed -= paid;
                if (settled > paid) {
                    grant(settled - paid);
                }
            }
        }
    }

    private void request(ConsumeRequest request) {
        synchronized (lock) {
            if (ended != null) {
                throw ended;
            }
            requests.onNext(request);
        }
    }

    /** Waits under {@link #lock} until {@code done}; fails once the stream ended, or after {@code timeoutMs} (0: no bound). */
    private void await(java.util.function.BooleanSupplier done, long timeoutMs, String what) {
        long deadline = timeoutMs == 0 ? Long.MAX_VALUE : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!done.getAsBoolean()) {
            if (ended != null) {
                throw ended;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new ReboundException(Status.Code.DEADLINE_EXCEEDED, "the broker did not answer within " + timeoutMs + " ms: waiting for " + what);
            }
            waitOn(timeoutMs == 0 ? 0 : Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
        }
    }

    private void waitOn(long millis) {
        try {
            lock.wait(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ReboundException(Status.Code.CANCELLED, "interrupted while waiting for the broker", e);
        }
    }

    /** Files the broker's answers: deliveries for {@link #next}, confirmations for {@link #flush}, voided deliveries dropped. */
    private final class Responses implements ClientResponseObserver<ConsumeRequest, ConsumeResponse> {
        @Override
        public void beforeStart(ClientCallStreamObserver<ConsumeRequest> stream) {
            requests = stream;
        }

        @Override
        public void onNext(ConsumeResponse response) {
            synchronized (lock) {
                switch (response.getKindCase()) {
                    case SUBSCRIBED -> {
                        queue = response.getSubscribed().getQueue();
                        address = response.getSubscribed().getAddress();
                    }
                    case DELIVERIES -> response.getDeliveries().getDeliveriesList().forEach(d -> buffered.add(Delivery.from(d)));
                    case SETTLED -> filed(response.getSettled());
                    case VOIDED -> voided(response.getVoided());
                    default -> { }
                }
                lock.notifyAll();
            }
        }

        private void filed(Settled settled) {
            unconfirmed--;
            unknown.addAll(settled.getUnknownDeliveryIdsList());
            if (!settled.getError().isEmpty()) {
                rejected.add(settled.getError() + " (" + Status.fromCodeValue(settled.getErrorCode()).getCode() + ")");
            }
            if (replenish) {
                owed += settled.getRefusedDeliveryIdsCount();
            }
        }

        /** Not a settle's answer: confirms nothing, and its ids the application has are left to their settles. */
        private void voided(Voided voided) {
            // Their messages went back to the queue: the application must not see them, and never used their credit.
            Set<Long> ids = new HashSet<>(voided.getDeliveryIdsList());
            int before = buffered.size();
            buffered.removeIf(delivery -> ids.contains(delivery.id()));
            regrant += before - buffered.size();
        }

        @Override
        public void onError(Throwable error) {
            synchronized (lock) {
                ReboundException status = ReboundException.from(error);
                // Before the subscription is confirmed it is the broker's refusal (a bad selector, no permission).
                ended = address == null ? status : new StreamClosedException(status.code(), status.reason(), error);
                lock.notifyAll();
            }
        }

        @Override
        public void onCompleted() {
            synchronized (lock) {
                ended = new StreamClosedException(Status.Code.UNAVAILABLE, "the broker ended the stream", null);
                lock.notifyAll();
            }
        }
    }
}
