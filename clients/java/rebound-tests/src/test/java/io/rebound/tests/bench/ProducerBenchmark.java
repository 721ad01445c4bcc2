package io.rebound.tests.bench;

import io.rebound.client.Consumer;
import io.rebound.client.Delivery;
import io.rebound.client.OutgoingMessage;
import io.rebound.client.Publisher;
import io.rebound.client.ReboundClient;
import io.rebound.jms.ReboundConnectionFactory;
import jakarta.jms.BytesMessage;
import jakarta.jms.CompletionListener;
import jakarta.jms.Connection;
import jakarta.jms.Message;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import rebound.v1.AdminOuterClass.RoutingType;

/**
 * The Java side of BENCHMARKS.md's "Java client": `rebound perf --workload durable --batch 1`'s load
 * (1 KiB durable messages, one per call, 64 in flight, one consumer acking what it received),
 * sent through the client's async API ({@code client}) or a JMS producer with a
 * CompletionListener ({@code jms}). Prints one JSON line. Run by bench/java-perf.sh.
 *
 * <pre>java -cp ... io.rebound.tests.bench.ProducerBenchmark URL client|jms [MESSAGES]</pre>
 */
public final class ProducerBenchmark {
    private static final int SIZE = 1024;
    private static final int IN_FLIGHT = 64;
    /** Sent first and not counted: the JIT compiles the hot paths meanwhile. */
    private static final int WARMUP = 100_000;

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String api = args[1];
        int messages = args.length > 2 ? Integer.parseInt(args[2]) : 100_000;
        try (ReboundClient client = ReboundClient.connect(url)) {
            String queue = "perf.java." + Long.toHexString(System.nanoTime());
            client.admin().createQueue(queue, queue, RoutingType.ROUTING_TYPE_ANYCAST, true);
            Sender sender = api.equals("jms") ? jms(url, queue) : asyncClient(client, queue);
            run(client, queue, sender, WARMUP);
            var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
            long commits0 = client.admin().serverInfo().getStoreCommits();
            long cpu0 = os.getProcessCpuTime();
            long t0 = System.nanoTime();
            long sendNs = run(client, queue, sender, messages);
            long e2eNs = System.nanoTime() - t0;
            double cpuUsPerMessage = (os.getProcessCpuTime() - cpu0) / 1_000.0 / messages;
            long commits = client.admin().serverInfo().getStoreCommits() - commits0;
            sender.close();
            client.admin().deleteQueue(queue);
            System.out.printf("{\"system\":\"rebound-java\",\"api\":\"%s\",\"messages\":%d,\"size\":%d,\"in_flight\":%d,\"batch\":1,"
                    + "\"send_msg_per_s\":%.0f,\"e2e_msg_per_s\":%.0f,\"store_commits\":%d,\"client_cpu_us_per_msg\":%.1f}%n",
                    api, messages, SIZE, IN_FLIGHT, messages * 1e9 / sendNs, messages * 1e9 / e2eNs, commits, cpuUsPerMessage);
        }
    }

    /** One message per call, at most {@link #IN_FLIGHT} unanswered; {@code done} is called once it is stored. */
    private interface Sender extends AutoCloseable {
        void send(byte[] body, Runnable done, java.util.function.Consumer<Throwable> failed) throws Exception;
    }

    private static Sender asyncClient(ReboundClient client, String queue) {
        Publisher publisher = client.publisher();
        return new Sender() {
            @Override
            public void send(byte[] body, Runnable done, java.util.function.Consumer<Throwable> failed) {
                publisher.send(new OutgoingMessage(queue, body)).whenComplete((id, error) -> {
                    if (error == null) {
                        done.run();
                    } else {
                        failed.accept(error);
                    }
                });
            }

            @Override
            public void close() {
                publisher.close();
            }
        };
    }

    private static Sender jms(String url, String queue) throws Exception {
        Connection connection = new ReboundConnectionFactory(url).createConnection();
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer producer = session.createProducer(session.createQueue(queue));
        return new Sender() {
            @Override
            public void send(byte[] body, Runnable done, java.util.function.Consumer<Throwable> failed) throws Exception {
                BytesMessage message = session.createBytesMessage();
                message.writeBytes(body);
                producer.send(message, new CompletionListener() {
                    @Override
                    public void onCompletion(Message m) {
                        done.run();
                    }

                    @Override
                    public void onException(Message m, Exception e) {
                        failed.accept(e);
                    }
                });
            }

            @Override
            public void close() throws Exception {
                connection.close();
            }
        };
    }

    /** Sends {@code messages} while a consumer acks them; returns how long the sends took (the consumer may finish later, as perf's e2e rate counts). */
    private static long run(ReboundClient client, String queue, Sender sender, int messages) throws Exception {
        Window window = new Window();
        CountDownLatch stored = new CountDownLatch(messages);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        // On a connection of its own, as perf's consumers are.
        Thread consumer = new Thread(() -> {
            try (ReboundClient own = ReboundClient.connect(client.url())) {
                consume(own, queue, messages, failure);
            }
        }, "bench-consumer");
        consumer.start();
        long t0 = System.nanoTime();
        for (int i = 0; i < messages && failure.get() == null; i++) {
            window.acquire();
            sender.send(new byte[SIZE], () -> {
                window.release();
                stored.countDown();
            }, error -> {
                failure.set(error);
                window.release();
                stored.countDown();
            });
        }
        stored.await();
        long sendNs = System.nanoTime() - t0;
        consumer.join();
        if (failure.get() != null) {
            throw new IllegalStateException("the benchmark failed", failure.get());
        }
        return sendNs;
    }

    /**
     * At most {@link #IN_FLIGHT} sends unanswered. A sender that found it full waits until half of
     * it is free, so that it is woken once per half window rather than once per answer (a thread
     * wakeup costs more than a send).
     */
    private static final class Window {
        private int inFlight;

        synchronized void acquire() throws InterruptedException {
            if (inFlight == IN_FLIGHT) {
                while (inFlight > IN_FLIGHT / 2) {
                    wait();
                }
            }
            inFlight++;
        }

        synchronized void release() {
            inFlight--;
            if (inFlight == IN_FLIGHT / 2) {
                notifyAll();
            }
        }
    }

    /** Acks what it received in one settle, as perf's consumers do. */
    private static void consume(ReboundClient client, String queue, int messages, AtomicReference<Throwable> failure) {
        try (Consumer consumer = client.consumer(queue).window(1000).open()) {
            long[] ids = new long[256];
            AtomicLong received = new AtomicLong();
            while (received.get() < messages && failure.get() == null) {
                Delivery first = consumer.next(Duration.ofSeconds(30));
                if (first == null) {
                    throw new IllegalStateException("no message for 30 s: " + received + " of " + messages + " received");
                }
                int n = 0;
                ids[n++] = first.id();
                for (Delivery more = consumer.next(Duration.ZERO); more != null; more = n < ids.length ? consumer.next(Duration.ZERO) : null) {
                    ids[n++] = more.id();
                }
                consumer.ack(java.util.Arrays.copyOf(ids, n));
                received.addAndGet(n);
            }
            consumer.flush();
        } catch (RuntimeException e) {
            failure.compareAndSet(null, e);
        }
    }
}
