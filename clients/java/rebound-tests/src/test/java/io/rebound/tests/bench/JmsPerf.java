package io.rebound.tests.bench;

import io.rebound.jms.ReboundConnectionFactory;
import jakarta.jms.BytesMessage;
import jakarta.jms.CompletionListener;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * The JMS load generator of bench/compare.sh: `rebound perf`'s workloads through plain JMS, the same
 * code against rebound ({@code rebound-jms}) and Apache Artemis ({@code artemis-jakarta-client}); only
 * the {@link ConnectionFactory} differs. Prints one JSON line in `rebound perf --json`'s schema
 * (BENCHMARKS.md) with {@code "system": "rebound-jms"} or {@code "artemis-jms"}.
 *
 * <p>Producers send persistent BytesMessages one per {@code send} call with a {@link
 * CompletionListener}, at most {@code in_flight} unanswered each; consumers are MessageListeners in
 * AUTO_ACKNOWLEDGE sessions, each producer and consumer on a connection of its own. A body starts with
 * its send time (ns since the run's start, little-endian) and its sequence number, as perf's do, so
 * latency is measured in one process with one clock. A poison message's listener throws: JMS then
 * gives it again (a failed attempt), until the broker's max-delivery-attempts moves it to the
 * dead-letter address; {@code poison_dlq_s} is when a consumer of its dead-letter queue has received
 * every poison message.
 *
 * <pre>java -cp ... io.rebound.tests.bench.JmsPerf rebound|artemis URL WORKLOAD [--messages N]
 *     [--warmup N] [--user U --password P] [--server-pid-file F] [--pause-after-fill DIR]</pre>
 *
 * {@code --warmup N}: first the same workload with N messages on a queue of its own, not reported
 * (the JIT; durable and fan only: poison's time goes to redelivery delays, backlog's fill is long).
 * {@code --server-pid-file}: the broker's pid, read at each RSS reading (a restart changes it).
 * {@code --pause-after-fill DIR} (backlog): once filled, creates DIR/filled and waits for
 * DIR/resume before consuming, so that the caller can restart the broker with the backlog.
 */
public final class JmsPerf {
    /** `rebound perf`'s workloads (perf/src/workload.rs; keep in step): what this generator runs. */
    record Workload(String name, long messages, int size, int producers, int consumers, int inFlight, long poisonEvery, boolean backlog) {
        boolean isPoison(long seq) {
            return poisonEvery > 0 && seq % poisonEvery == poisonEvery - 1;
        }

        long poisonCount() {
            return poisonEvery > 0 ? messages / poisonEvery : 0;
        }

        Workload withMessages(long n) {
            return new Workload(name, n, size, producers, consumers, inFlight, poisonEvery, backlog);
        }
    }

    static final List<Workload> WORKLOADS = List.of(
            new Workload("durable", 50_000, 1024, 1, 1, 64, 0, false),
            new Workload("fan", 50_000, 1024, 4, 4, 64, 0, false),
            new Workload("poison", 10_000, 1024, 1, 1, 64, 10, false),
            new Workload("backlog", 500_000, 100, 1, 1, 2000, 0, true));

    /** A run that neither sends nor receives anything for this long has stalled. */
    private static final long STALL_NS = 30_000_000_000L;
    private static final long POLL_MS = 5;

    private final String provider;
    private final ConnectionFactory factory;
    private final Workload spec;
    private final String queue;
    private final Path serverPidFile;
    private final long epoch = System.nanoTime();
    private final AtomicLong sent = new AtomicLong();
    private final AtomicLong lastSentNs = new AtomicLong();
    private final AtomicLong acked = new AtomicLong();
    private final AtomicLong lastAckNs = new AtomicLong();
    private final AtomicLong poisonDeliveries = new AtomicLong();
    private final AtomicLong redeliveredGood = new AtomicLong();
    /** One bit per sequence number: received before (a good message counts once). */
    private final AtomicLongArray seen;
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private final List<Connection> connections = new ArrayList<>();

    private JmsPerf(String provider, ConnectionFactory factory, Workload spec, Path serverPidFile) {
        this.provider = provider;
        this.factory = factory;
        this.spec = spec;
        this.queue = "perf." + spec.name() + "." + Long.toHexString(System.nanoTime() & 0xffffffffL);
        this.serverPidFile = serverPidFile;
        this.seen = new AtomicLongArray((int) (spec.messages() / 64 + 1));
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            throw new IllegalArgumentException("usage: JmsPerf rebound|artemis URL WORKLOAD [--messages N] [--warmup N] [--user U --password P] "
                    + "[--server-pid-file F] [--pause-after-fill DIR]");
        }
        Map<String, String> options = new HashMap<>();
        for (int i = 3; i + 1 < args.length; i += 2) {
            options.put(args[i], args[i + 1]);
        }
        Workload base = WORKLOADS.stream().filter(w -> w.name().equals(args[2])).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("unknown workload " + args[2] + " (durable, fan, poison, backlog)"));
        Workload spec = base.withMessages(Long.parseLong(options.getOrDefault("--messages", Long.toString(base.messages()))));
        ConnectionFactory factory = switch (args[0]) {
            case "rebound" -> new ReboundConnectionFactory(args[1]);
            case "artemis" -> new ActiveMQConnectionFactory(args[1]);
            default -> throw new IllegalArgumentException("unknown provider " + args[0] + " (rebound, artemis)");
        };
        String user = options.get("--user");
        String password = options.get("--password");
        ConnectionFactory login = user == null ? factory : new LoginFactory(factory, user, password);
        Path pidFile = options.containsKey("--server-pid-file") ? Path.of(options.get("--server-pid-file")) : null;
        Path pause = options.containsKey("--pause-after-fill") ? Path.of(options.get("--pause-after-fill")) : null;
        long warmup = spec.poisonEvery() == 0 && !spec.backlog() ? Long.parseLong(options.getOrDefault("--warmup", "0")) : 0;
        if (warmup > 0) {
            // The same load on a queue of its own, not reported: the JIT compiles the hot paths meanwhile.
            JmsPerf run = new JmsPerf(args[0], login, spec.withMessages(warmup), null);
            try {
                run.run(null);
            } finally {
                run.closeAll();
            }
        }
        JmsPerf run = new JmsPerf(args[0], login, spec, pidFile);
        try {
            String report = run.run(pause);
            // The broker's CPU is measured around the whole process: the warm-up's messages count.
            System.out.println(report.substring(0, report.length() - 1) + ",\"warmup_messages\":" + warmup + "}");
        } finally {
            run.closeAll();
        }
    }

    /** Runs the workload and returns its report. */
    private String run(Path pauseAfterFill) throws Exception {
        long[] rssBefore = rss();
        List<Recorder> sendLatencies = new ArrayList<>();
        List<Thread> producers = new ArrayList<>();
        for (int i = 0; i < spec.producers(); i++) {
            long from = spec.messages() * i / spec.producers();
            long to = spec.messages() * (i + 1) / spec.producers();
            Recorder latencies = new Recorder();
            sendLatencies.add(latencies);
            Connection connection = connect();
            producers.add(start("producer-" + i, () -> produce(connection, from, to, latencies)));
        }
        List<Recorder> e2eLatencies = new ArrayList<>();
        double drainFromS = 0;
        long[] rssFilled = null;
        if (spec.backlog()) {
            awaitAll(producers);
            rssFilled = rss();
            if (pauseAfterFill != null) {
                closeAll();
                Files.createFile(pauseAfterFill.resolve("filled"));
                while (!Files.exists(pauseAfterFill.resolve("resume"))) {
                    Thread.sleep(POLL_MS);
                }
            }
            drainFromS = nowS();
            startConsumers(e2eLatencies);
        } else {
            startConsumers(e2eLatencies);
            awaitAll(producers);
        }
        long good = spec.messages() - spec.poisonCount();
        await(() -> acked.get() >= good, () -> acked.get() + " of " + good + " good messages acked");
        double goodDoneS = lastAckNs.get() / 1e9;
        Double poisonDlqS = spec.poisonCount() > 0 ? awaitDeadLetters() : null;
        double endS = nowS();
        long[] rssEnd = rss();

        double sendDoneS = lastSentNs.get() / 1e9;
        StringBuilder json = new StringBuilder("{");
        field(json, "system", "\"" + provider + "-jms\"");
        field(json, "workload", "\"" + spec.name() + "\"");
        field(json, "queue", "\"" + queue + "\"");
        field(json, "messages", spec.messages());
        field(json, "size", spec.size());
        field(json, "producers", spec.producers());
        field(json, "consumers", spec.consumers());
        field(json, "in_flight", spec.inFlight());
        field(json, "batch", 1);
        field(json, "api", "\"jms\"");
        field(json, "duration_s", endS);
        field(json, "send_rate", spec.messages() / sendDoneS);
        field(json, "e2e_rate", good / goodDoneS);
        field(json, "latency_ms", Recorder.merged(e2eLatencies).json());
        field(json, "send_latency_ms", Recorder.merged(sendLatencies).json());
        field(json, "store_commits", null);
        field(json, "store_syncs", null);
        field(json, "syncs_per_message", null);
        field(json, "rss_bytes", rssEnd[0]);
        // A restart after the fill starts a new process: the fill's peak counts too.
        field(json, "peak_rss_bytes", Math.max(rssEnd[1], rssFilled == null ? 0 : rssFilled[1]));
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        field(json, "client_cpu_s", os.getProcessCpuTime() / 1e9);
        if (poisonDlqS != null) {
            field(json, "poison_messages", spec.poisonCount());
            field(json, "good_done_s", goodDoneS);
            field(json, "poison_dlq_s", poisonDlqS);
            field(json, "deliveries_per_poison", (double) poisonDeliveries.get() / spec.poisonCount());
        }
        if (rssFilled != null) {
            long growth = rssFilled[0] - rssBefore[0];
            field(json, "drain_rate", good / (goodDoneS - drainFromS));
            field(json, "rss_growth_bytes", growth);
            field(json, "bytes_per_message", (double) growth / spec.messages());
        }
        field(json, "redelivered_good", redeliveredGood.get());
        json.setLength(json.length() - 1);
        return json.append('}').toString();
    }

    private static void field(StringBuilder json, String key, Object value) {
        String text = value instanceof Double d ? String.format(Locale.ROOT, "%.6f", d) : String.valueOf(value);
        json.append('"').append(key).append("\":").append(text).append(',');
    }

    private double nowS() {
        return (System.nanoTime() - epoch) / 1e9;
    }

    private Connection connect() throws JMSException {
        Connection connection = factory.createConnection();
        synchronized (connections) {
            connections.add(connection);
        }
        return connection;
    }

    private void closeAll() {
        synchronized (connections) {
            for (Connection c : connections) {
                try {
                    c.close();
                } catch (JMSException e) {
                    System.err.println("JmsPerf: closing a connection: " + e);
                }
            }
            connections.clear();
        }
    }

    private interface Task {
        void run() throws Exception;
    }

    private Thread start(String name, Task task) {
        Thread thread = new Thread(() -> {
            try {
                task.run();
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            }
        }, name);
        thread.start();
        return thread;
    }

    private void awaitAll(List<Thread> threads) throws Exception {
        for (Thread t : threads) {
            t.join();
        }
        checkFailure();
    }

    private void checkFailure() {
        if (failure.get() != null) {
            throw new IllegalStateException("the run failed: " + failure.get(), failure.get());
        }
    }

    /** Polls {@code done} until it holds; fails on a client error or when nothing moves for {@link #STALL_NS}. */
    private void await(java.util.function.BooleanSupplier done, java.util.function.Supplier<String> progress) throws InterruptedException {
        long lastChange = System.nanoTime();
        long last = -1;
        while (!done.getAsBoolean()) {
            checkFailure();
            long now = sent.get() + acked.get() + poisonDeliveries.get();
            if (now != last) {
                last = now;
                lastChange = System.nanoTime();
            } else if (System.nanoTime() - lastChange > STALL_NS) {
                throw new IllegalStateException("no progress for 30 s: " + progress.get());
            }
            Thread.sleep(POLL_MS);
        }
    }

    /** Sends messages {@code from} to {@code to} (exclusive), at most in_flight unanswered. */
    private void produce(Connection connection, long from, long to, Recorder latencies) throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer producer = session.createProducer(session.createQueue(queue));
        producer.setDeliveryMode(DeliveryMode.PERSISTENT);
        Semaphore window = new Semaphore(spec.inFlight());
        byte[] body = new byte[spec.size()];
        ByteBuffer header = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
        for (long seq = from; seq < to && failure.get() == null; seq++) {
            window.acquire();
            long sentNs = System.nanoTime() - epoch;
            header.putLong(0, sentNs).putLong(8, seq);
            BytesMessage message = session.createBytesMessage();
            message.writeBytes(body);
            producer.send(message, new CompletionListener() {
                @Override
                public void onCompletion(Message m) {
                    long now = System.nanoTime() - epoch;
                    latencies.record(now - sentNs);
                    lastSentNs.accumulateAndGet(now, Math::max);
                    sent.incrementAndGet();
                    window.release();
                }

                @Override
                public void onException(Message m, Exception e) {
                    failure.compareAndSet(null, e);
                    window.release();
                }
            });
        }
        window.acquire(spec.inFlight());
    }

    private void startConsumers(List<Recorder> latencies) throws JMSException {
        for (int i = 0; i < spec.consumers(); i++) {
            Recorder recorder = new Recorder();
            latencies.add(recorder);
            Connection connection = connect();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer consumer = session.createConsumer(session.createQueue(queue));
            consumer.setMessageListener(message -> onMessage(message, recorder));
            connection.start();
        }
    }

    /** Acks a good message (by returning) and refuses a poison one (by throwing: JMS redelivers it). */
    private void onMessage(Message message, Recorder latencies) {
        try {
            BytesMessage bytes = (BytesMessage) message;
            byte[] header = new byte[16];
            if (bytes.readBytes(header) < 16) {
                throw new IllegalStateException("message " + message.getJMSMessageID() + " is not from JmsPerf (body too short)");
            }
            ByteBuffer b = ByteBuffer.wrap(header).order(ByteOrder.LITTLE_ENDIAN);
            long sentNs = b.getLong(0);
            long seq = b.getLong(8);
            if (spec.isPoison(seq)) {
                poisonDeliveries.incrementAndGet();
                throw new PoisonException();
            }
            long now = System.nanoTime() - epoch;
            if (message.getJMSRedelivered()) {
                redeliveredGood.incrementAndGet();
            }
            if (firstTime(seq)) {
                latencies.record(now - sentNs);
                lastAckNs.accumulateAndGet(now, Math::max);
                acked.incrementAndGet();
            }
        } catch (JMSException e) {
            failure.compareAndSet(null, e);
        }
    }

    /** Thrown by the listener for a poison message: no stack trace, it is expected. */
    private static final class PoisonException extends RuntimeException {
        PoisonException() {
            super("JmsPerf: poison", null, false, false);
        }
    }

    private boolean firstTime(long seq) {
        int word = (int) (seq >>> 6);
        long bit = 1L << (seq & 63);
        long old;
        do {
            old = seen.get(word);
            if ((old & bit) != 0) {
                return false;
            }
        } while (!seen.compareAndSet(word, old, old | bit));
        return true;
    }

    /**
     * Receives the poison messages from their dead-letter queue ({@code DLQ.<address>} on the
     * dead-letter address DLA, created by the broker with the first dead letter, so opening the
     * consumer is retried until it exists) and returns when the last one arrived, in s.
     */
    private double awaitDeadLetters() throws Exception {
        Connection connection = connect();
        connection.start();
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        // Artemis names a queue on another address by its fully qualified name; rebound by its name.
        String dlq = provider.equals("artemis") ? "DLA::DLQ." + queue : "DLQ." + queue;
        MessageConsumer consumer = null;
        long deadline = System.nanoTime() + STALL_NS;
        while (consumer == null) {
            try {
                consumer = session.createConsumer(session.createQueue(dlq));
            } catch (JMSException e) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("no dead-letter queue " + dlq + " after 30 s: " + e, e);
                }
                Thread.sleep(POLL_MS);
            }
        }
        long received = 0;
        while (received < spec.poisonCount()) {
            Message m = consumer.receive(STALL_NS / 1_000_000);
            if (m == null) {
                throw new IllegalStateException("no dead letter for 30 s: " + received + " of " + spec.poisonCount() + " received");
            }
            received++;
        }
        return nowS();
    }

    /** VmRSS and VmHWM of the broker, in bytes; zeros without a pid file. */
    private long[] rss() throws Exception {
        if (serverPidFile == null) {
            return new long[] {0, 0};
        }
        String pid = Files.readString(serverPidFile).trim();
        long rss = 0;
        long hwm = 0;
        for (String line : Files.readAllLines(Path.of("/proc", pid, "status"))) {
            if (line.startsWith("VmRSS:")) {
                rss = kib(line);
            } else if (line.startsWith("VmHWM:")) {
                hwm = kib(line);
            }
        }
        return new long[] {rss, hwm};
    }

    private static long kib(String line) {
        return Long.parseLong(line.split("\\s+")[1]) * 1024;
    }

    /** Latencies in ns, kept whole (at most a few million per run) and sorted for the percentiles. */
    static final class Recorder {
        private long[] values = new long[1024];
        private int n;

        synchronized void record(long ns) {
            if (n == values.length) {
                values = Arrays.copyOf(values, n * 2);
            }
            values[n++] = ns;
        }

        static Recorder merged(List<Recorder> recorders) {
            Recorder all = new Recorder();
            for (Recorder r : recorders) {
                synchronized (r) {
                    for (int i = 0; i < r.n; i++) {
                        all.record(r.values[i]);
                    }
                }
            }
            Arrays.sort(all.values, 0, all.n);
            return all;
        }

        /** The value at quantile {@code q} of sorted values (nearest rank), in ms. */
        private double at(double q) {
            if (n == 0) {
                return 0;
            }
            int rank = (int) Math.ceil(q * n);
            return values[Math.max(1, Math.min(n, rank)) - 1] / 1e6;
        }

        String json() {
            return String.format(Locale.ROOT, "{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f}", at(0.5), at(0.99), at(0.999), at(1.0));
        }
    }

    /** A factory whose connections log in: JMS has no standard way to set a default user. */
    private record LoginFactory(ConnectionFactory factory, String user, String password) implements ConnectionFactory {
        @Override
        public Connection createConnection() throws JMSException {
            return factory.createConnection(user, password);
        }

        @Override
        public Connection createConnection(String u, String p) throws JMSException {
            return factory.createConnection(u, p);
        }

        @Override
        public jakarta.jms.JMSContext createContext() {
            return factory.createContext(user, password);
        }

        @Override
        public jakarta.jms.JMSContext createContext(String u, String p) {
            return factory.createContext(u, p);
        }

        @Override
        public jakarta.jms.JMSContext createContext(String u, String p, int sessionMode) {
            return factory.createContext(u, p, sessionMode);
        }

        @Override
        public jakarta.jms.JMSContext createContext(int sessionMode) {
            return factory.createContext(user, password, sessionMode);
        }
    }
}
