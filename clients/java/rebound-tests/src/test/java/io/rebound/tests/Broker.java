package io.rebound.tests;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A {@code rebound serve} process with its own temporary directory (data dir, config file, log),
 * listening on a free port of 127.0.0.1, as the Rust black-box tests start it. The binary is
 * {@code REBOUND_BIN}, else the repository's {@code target/release/rebound}, then
 * {@code target/debug/rebound}; without one the test fails under {@code CI=true} and is skipped
 * with the reason otherwise ({@link Required}). {@link #close()} kills the process and deletes the directory.
 */
public final class Broker implements AutoCloseable {
    private static final long STARTUP_SECONDS = 20;
    private static final String LISTENING = "rebound listening on ";

    private final Path dir;
    private final Path config;
    private Process process;
    private String address;

    private Broker(Path dir, Path config) {
        this.dir = dir;
        this.config = config;
    }

    /** Starts a broker with {@code toml} as its config file. */
    public static Broker start(String toml) {
        Path binary = binary();
        try {
            Path dir = Files.createTempDirectory("rebound-java-test-");
            Path config = dir.resolve("rebound.toml");
            Files.writeString(config, toml);
            Broker broker = new Broker(dir, config);
            broker.spawn(binary, "127.0.0.1:0");
            return broker;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The {@code rebound} binary to test; fails the test without one ({@link Required} skips it first, outside CI). */
    public static Path binary() {
        List<Path> candidates = candidates();
        for (Path candidate : candidates) {
            if (Files.isExecutable(candidate)) {
                return candidate.toAbsolutePath().normalize();
            }
        }
        return fail((CI ? "this test cannot run under CI: " : "") + missing(candidates));
    }

    private static final boolean CI = "true".equals(System.getenv("CI"));

    private static List<Path> candidates() {
        String configured = System.getenv("REBOUND_BIN");
        if (configured != null && !configured.isEmpty()) {
            return List.of(Path.of(configured));
        }
        Path repo = Path.of(System.getProperty("rebound.repo", "../.."));
        return List.of(repo.resolve("target/release/rebound"), repo.resolve("target/debug/rebound"));
    }

    private static String missing(List<Path> candidates) {
        return "no rebound binary: tried " + candidates + " (set REBOUND_BIN or run cargo build)";
    }

    /**
     * For the test classes: without a binary, skipped with the reason (reported by JUnit and
     * printed as {@code SKIPPED: ...}), except under {@code CI=true}, where they run and fail.
     */
    public static final class Required implements ExecutionCondition {
        @Override
        public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
            List<Path> candidates = candidates();
            if (CI || candidates.stream().anyMatch(Files::isExecutable)) {
                return ConditionEvaluationResult.enabled("a rebound binary is there, or CI=true");
            }
            String reason = "SKIPPED: " + missing(candidates);
            System.out.println(reason + " (" + context.getDisplayName() + ")");
            return ConditionEvaluationResult.disabled(reason);
        }
    }

    private void spawn(Path binary, String listen) throws IOException {
        ProcessBuilder builder = new ProcessBuilder(binary.toString(), "serve", "--listen", listen,
                "--data-dir", dir.resolve("data").toString(), "--config", config.toString(), "--http-listen", "127.0.0.1:0")
                .redirectError(ProcessBuilder.Redirect.appendTo(dir.resolve("broker.log").toFile()))
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        builder.environment().remove("REBOUND_SERVER");
        process = builder.start();
        CompletableFuture<String> listening = new CompletableFuture<>();
        Process started = process;
        // Reads the listening line, then keeps draining stdout so that the broker never blocks on a full pipe.
        Thread reader = new Thread(() -> {
            try (BufferedReader out = new BufferedReader(new InputStreamReader(started.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = out.readLine()) != null) {
                    if (line.startsWith(LISTENING)) {
                        listening.complete(line.substring(LISTENING.length()).trim());
                    }
                }
            } catch (IOException ignored) {
                // The process is gone.
            }
            listening.completeExceptionally(new IOException("the broker exited before listening"));
        }, "rebound-broker-stdout");
        reader.setDaemon(true);
        reader.start();
        try {
            address = listening.get(STARTUP_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
            process.destroyForcibly();
            throw new IllegalStateException("the broker did not start: " + e.getMessage() + "; log:\n" + log(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** The URL for clients. */
    public String url() {
        return "http://" + address;
    }

    /** {@code host:port} the broker listens on. */
    public String address() {
        return address;
    }

    /** The temporary directory holding data dir, config and log: a place for a test's own files too. */
    public Path dir() {
        return dir;
    }

    /** Everything the broker logged so far, over all its restarts. */
    public String log() {
        try {
            return Files.readString(dir.resolve("broker.log"));
        } catch (IOException e) {
            return "";
        }
    }

    /** SIGKILL, like a crash or power loss. */
    public void kill9() {
        process.destroyForcibly();
        waitFor();
    }

    /** SIGTERM, and waits (bounded) for it to exit. */
    public void terminate() {
        process.destroy();
        waitFor();
    }

    private void waitFor() {
        try {
            if (!process.waitFor(STARTUP_SECONDS, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                fail("the broker did not exit within " + STARTUP_SECONDS + " s; log:\n" + log());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Starts the broker again on the same data dir, config and port, as a broker with a configured
     * address comes back: clients keep their URL and reconnect by themselves. A running broker is
     * terminated first. The bind is retried a few times should the port still be taken.
     */
    public void restartOnSamePort() {
        if (process.isAlive()) {
            terminate();
        }
        Path binary = binary();
        for (int attempt = 0; ; attempt++) {
            try {
                spawn(binary, address);
                return;
            } catch (IllegalStateException | IOException e) {
                if (attempt == 10) {
                    throw new IllegalStateException("the broker did not restart on " + address, e);
                }
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    @Override
    public void close() {
        if (process != null && process.isAlive()) {
            process.destroyForcibly();
            waitFor();
        }
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // A leftover temp dir is harmless.
        }
    }
}
