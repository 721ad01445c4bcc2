package io.rebound.client;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Consumes a queue and runs a handler for every message, the way an MDB container runs
 * {@code onMessage}, mapping the handler's outcome to a settlement:
 *
 * <table>
 * <caption>outcomes</caption>
 * <tr><th>handler</th><th>non-transacted</th><th>transacted</th></tr>
 * <tr><td>returns</td><td>ack</td><td>ack in the message's transaction, commit</td></tr>
 * <tr><td>{@link TemporarilyUnavailableException}</td><td>nack (with its retry-after)</td><td>rollback, nack</td></tr>
 * <tr><td>{@link DependencyDownException}</td><td>nack pausing the queue</td><td>rollback, nack pausing the queue</td></tr>
 * <tr><td>{@link PermanentFailureException}</td><td>dead-letter with the reason</td><td>rollback, dead-letter</td></tr>
 * <tr><td>any other exception</td><td>nack, logged</td><td>rollback, nack, logged</td></tr>
 * </table>
 *
 * <p>A nacked message counts as a failed delivery: the address's redelivery settings apply. Up to
 * {@code concurrency} handlers run at once; it is also the consumer's credit window. Delivery is
 * at least once: when the broker restarts or the connection breaks, the listener resubscribes
 * (backoff from 100 ms doubling to 5 s) and the messages it had not settled are delivered again.
 * Handlers still running when their stream broke finish, but their outcome is discarded
 * ({@link Stats#abandoned()}). {@link #stop()} is graceful: no more messages, the running handlers
 * finish and are settled, and what was received but not handed out goes back to the queue without
 * counting as an attempt.
 */
public final class Listener implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Listener.class.getName());
    private static final Duration MIN_BACKOFF = Duration.ofMillis(100);
    private static final Duration MAX_BACKOFF = Duration.ofSeconds(5);
    /** How often the dispatcher looks up from the queue to see whether it was stopped. */
    private static final Duration POLL = Duration.ofMillis(100);

    private final ReboundClient client;
    private final String queue;
    private final int concurrency;
    private final boolean transacted;
    private final MessageHandler handler;
    private final ExecutorService handlers;
    private final Thread dispatcher;
    private volatile boolean stopping;
    private final AtomicLong acked = new AtomicLong();
    private final AtomicLong retried = new AtomicLong();
    private final AtomicLong deadLettered = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong reconnects = new AtomicLong();
    private final AtomicLong abandoned = new AtomicLong();

    /** What a listener did so far. {@code retried} counts both temporary failures and dependency outages. */
    public record Stats(long acked, long retried, long deadLettered, long failed, long reconnects, long abandoned) {}

    /** A listener for {@code queue}; set its options, then {@link Builder#start} it with the handler. */
    public static Builder builder(ReboundClient client, String queue) {
        return new Builder(client, queue);
    }

    public static final class Builder {
        private final ReboundClient client;
        private final String queue;
        private int concurrency = 1;
        private boolean transacted;

        private Builder(ReboundClient client, String queue) {
            this.client = client;
            this.queue = queue;
        }

        /** Runs up to {@code concurrency} handlers at once (at least 1; default 1). */
        public Builder concurrency(int concurrency) {
            this.concurrency = Math.max(1, concurrency);
            return this;
        }

        /** Handles each message in a transaction of its own (default: no): success commits the handler's sends with the ack. */
        public Builder transacted(boolean transacted) {
            this.transacted = transacted;
            return this;
        }

        /** Starts the listener in the background; it subscribes, and keeps resubscribing until {@link Listener#stop()}. */
        public Listener start(MessageHandler handler) {
            return new Listener(this, handler);
        }
    }

    private Listener(Builder config, MessageHandler handler) {
        this.client = config.client;
        this.queue = config.queue;
        this.concurrency = config.concurrency;
        this.transacted = config.transacted;
        this.handler = handler;
        AtomicInteger threads = new AtomicInteger();
        this.handlers = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "rebound-listener-" + queue + "-" + threads.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        this.dispatcher = new Thread(this::run, "rebound-listener-" + queue);
        this.dispatcher.setDaemon(true);
        this.dispatcher.start();
    }

    public Stats stats() {
        return new Stats(acked.get(), retried.get(), deadLettered.get(), failed.get(), reconnects.get(), abandoned.get());
    }

    /** Stops gracefully (see the class comment) and returns the final {@link #stats()}. */
    public Stats stop() {
        stopping = true;
        try {
            dispatcher.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        handlers.shutdown();
        return stats();
    }

    @Override
    public void close() {
        stop();
    }

    private void run() {
        Duration backoff = MIN_BACKOFF;
        while (!stopping) {
            Subscription subscription;
            try {
                subscription = new Subscription();
            } catch (ReboundException e) {
                LOG.log(Level.WARNING, "listener on ''{0}'' cannot subscribe, retrying in {1} ms: {2}", queue, backoff.toMillis(), e.getMessage());
                sleep(backoff);
                backoff = backoff.multipliedBy(2).compareTo(MAX_BACKOFF) > 0 ? MAX_BACKOFF : backoff.multipliedBy(2);
                client.resetConnectBackoff();
                continue;
            }
            backoff = MIN_BACKOFF;
            try {
                subscription.serve();
                return;
            } catch (ReboundException e) {
                reconnects.incrementAndGet();
                LOG.log(Level.WARNING, "listener on ''{0}'' lost its subscription; resubscribing: {1}", queue, e.getMessage());
                client.resetConnectBackoff();
                sleep(MIN_BACKOFF);
            }
        }
    }

    private static void sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** One subscription: its consumer, its session when transacted, and the handlers running on it. */
    private final class Subscription {
        private final Consumer consumer;
        private final Session session;
        private final Semaphore slots = new Semaphore(concurrency);
        /** Set once its stream broke: the deliveries went back with it, so outcomes must not be settled. */
        private volatile boolean broken;

        Subscription() {
            this.session = transacted ? client.session() : null;
            try {
                this.consumer = client.consumer(queue).window(concurrency).open();
            } catch (ReboundException e) {
                if (session != null) {
                    session.close();
                }
                throw e;
            }
        }

        /** Runs until stopped (returns) or broken (throws why). */
        void serve() {
            try {
                while (!stopping && !broken) {
                    slots.acquireUninterruptibly();
                    Delivery delivery;
                    try {
                        delivery = consumer.next(POLL);
                    } catch (ReboundException e) {
                        slots.release();
                        throw e;
                    }
                    if (delivery == null) {
                        slots.release();
                        continue;
                    }
                    Transaction tx = session == null ? null : session.begin();
                    handlers.execute(() -> handle(delivery, tx));
                }
                if (broken) {
                    throw new StreamClosedException(io.grpc.Status.Code.UNAVAILABLE, "a settle failed on the listener's stream", null);
                }
                // Stopping: the running handlers finish and are settled, then the rest goes back.
                slots.acquireUninterruptibly(concurrency);
                consumer.close();
            } catch (ReboundException e) {
                broken = true;
                abandoned.addAndGet(concurrency - slots.availablePermits());
                throw e;
            } finally {
                if (session != null) {
                    session.close();
                }
            }
        }

        private void handle(Delivery delivery, Transaction tx) {
            Throwable failure = null;
            try {
                handler.onMessage(new Incoming(delivery.message(), delivery.deliveryCount(), delivery.redelivered(), delivery.queue(), Optional.ofNullable(tx)));
            } catch (Throwable t) {
                failure = t;
            }
            try {
                if (!broken) {
                    settle(delivery, tx, failure);
                }
            } catch (ReboundException e) {
                // Its delivery went back with the stream, like the other running ones.
                if (!broken) {
                    broken = true;
                    abandoned.incrementAndGet();
                }
            } finally {
                slots.release();
            }
        }

        private void settle(Delivery delivery, Transaction tx, Throwable failure) {
            long id = delivery.id();
            long messageId = delivery.message().id();
            if (failure == null) {
                if (tx == null) {
                    consumer.ack(id);
                    acked.incrementAndGet();
                } else {
                    commit(id, messageId, tx);
                }
                return;
            }
            if (tx != null) {
                try {
                    tx.rollback();
                } catch (ReboundException e) {
                    // A broken session rolls back by itself.
                    LOG.log(Level.DEBUG, "rollback of message {0} failed: {1}", Long.toString(messageId), e.getMessage());
                }
            }
            String reason = failure.getMessage() == null ? failure.toString() : failure.getMessage();
            if (failure instanceof TemporarilyUnavailableException temporary) {
                LOG.log(Level.DEBUG, "message {0} of ''{1}'' will be redelivered: {2}", Long.toString(messageId), queue, reason);
                if (temporary.retryAfter().isPresent()) {
                    consumer.nackAfter(temporary.retryAfter().get(), reason, id);
                } else {
                    consumer.nack(reason, id);
                }
                retried.incrementAndGet();
            } else if (failure instanceof DependencyDownException down) {
                LOG.log(Level.DEBUG, "dependency down; pausing ''{0}'' for {1} ms: {2}", queue, down.pause().toMillis(), reason);
                consumer.nackPausingQueue(down.pause(), reason, id);
                retried.incrementAndGet();
            } else if (failure instanceof PermanentFailureException) {
                LOG.log(Level.WARNING, "dead-lettering message {0} of ''{1}'': {2}", Long.toString(messageId), queue, reason);
                consumer.deadLetter(reason, id);
                deadLettered.incrementAndGet();
            } else {
                LOG.log(Level.WARNING, "handler failed on message " + messageId + " of '" + queue + "'; it will be redelivered", failure);
                consumer.nack(reason, id);
                failed.incrementAndGet();
            }
        }

        /** Acks in the message's transaction and commits; a commit that did not happen leaves the message to be redelivered. */
        private void commit(long id, long messageId, Transaction tx) {
            try {
                consumer.ackIn(tx, id);
            } catch (SettleRejectedException e) {
                // The transaction is gone (its session broke): settle the delivery itself.
                consumer.nack(e.getMessage(), id);
                failed.incrementAndGet();
                return;
            }
            try {
                tx.commit();
                acked.incrementAndGet();
            } catch (ReboundException e) {
                LOG.log(Level.WARNING, "commit of message {0} of ''{1}'' failed; it will be redelivered: {2}", Long.toString(messageId), queue, e.getMessage());
                failed.incrementAndGet();
            }
        }
    }
}
