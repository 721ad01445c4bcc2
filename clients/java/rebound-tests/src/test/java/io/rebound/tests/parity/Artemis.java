package io.rebound.tests.parity;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;

/**
 * A real Apache Artemis broker, run by {@code bench/artemis/artemis.sh} in a temporary directory
 * with the address settings of a rebound config. When the script cannot fetch Artemis (exit code
 * 3: no Maven, no network), the test fails under {@code CI=true} and is aborted (reported as
 * skipped, with the reason) otherwise. {@link #close()} stops it and deletes the directory.
 */
final class Artemis implements AutoCloseable {
    /** The script's exit code for "Artemis could not be fetched". */
    private static final int UNAVAILABLE = 3;
    /** Fetching (the first time), creating and starting (the script bounds start-up itself to 120 s); within the tests' timeout. */
    private static final long START_SECONDS = 240;
    private static final boolean CI = "true".equals(System.getenv("CI"));

    private final Path dir;
    private Map<String, String> env;

    private Artemis(Path dir) {
        this.dir = dir;
    }

    /** Creates and starts a broker whose address settings are those of the rebound config {@code toml}. */
    static Artemis start(String toml) {
        try {
            Path dir = Files.createTempDirectory("rebound-parity-artemis-");
            Path config = dir.resolve("rebound.toml");
            Files.writeString(config, toml);
            Artemis artemis = new Artemis(dir);
            try {
                artemis.env = artemis.script("start", dir.resolve("broker").toString(), "--config", config.toString());
            } catch (RuntimeException | Error e) {
                artemis.close();
                throw e;
            }
            return artemis;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@code host:port} of its acceptor. */
    String address() {
        return env.get("ARTEMIS_URL").substring("tcp://".length());
    }

    String user() {
        return env.get("ARTEMIS_USER");
    }

    String password() {
        return env.get("ARTEMIS_PASSWORD");
    }

    /** SIGKILL, like a crash, then the same broker (journal, port) started again. */
    void kill9AndRestart() {
        script("stop", dir.resolve("broker").toString(), "--kill");
        env = script("start", dir.resolve("broker").toString());
    }

    /** Runs the script; its {@code KEY=value} lines on stdout. */
    private Map<String, String> script(String... args) {
        Path script = Path.of(System.getProperty("rebound.repo", "../.."), "bench/artemis/artemis.sh").toAbsolutePath().normalize();
        Path log = dir.resolve("script.log");
        String[] command = Stream.concat(Stream.of("bash", script.toString()), Stream.of(args)).toArray(String[]::new);
        try {
            Path out = Files.createTempFile(dir, "script-", ".out");
            Process process = new ProcessBuilder(command)
                    .redirectOutput(out.toFile())
                    .redirectError(ProcessBuilder.Redirect.appendTo(log.toFile()))
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                    .start();
            if (!process.waitFor(START_SECONDS, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                fail("artemis.sh " + String.join(" ", args) + " did not finish within " + START_SECONDS + " s; log:\n" + Files.readString(log));
            }
            String errors = Files.readString(log, StandardCharsets.UTF_8);
            if (process.exitValue() == UNAVAILABLE) {
                String reason = "Apache Artemis is unavailable: " + errors.strip();
                if (CI) {
                    fail("this test cannot run under CI: " + reason);
                }
                System.out.println("SKIPPED: " + reason);
                Assumptions.abort("SKIPPED: " + reason);
            }
            if (process.exitValue() != 0) {
                fail("artemis.sh " + String.join(" ", args) + " failed (exit " + process.exitValue() + "):\n" + errors);
            }
            Map<String, String> values = new HashMap<>();
            for (String line : Files.readAllLines(out)) {
                int eq = line.indexOf('=');
                if (eq > 0) {
                    values.put(line.substring(0, eq), line.substring(eq + 1));
                }
            }
            return values;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void close() {
        try {
            script("stop", dir.resolve("broker").toString());
        } finally {
            try (Stream<Path> files = Files.walk(dir)) {
                files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException ignored) {
                // A leftover temp dir is harmless.
            }
        }
    }
}
