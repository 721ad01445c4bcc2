package io.rebound.tests.parity;

import io.rebound.jms.ReboundConnectionFactory;
import io.rebound.tests.Broker;
import jakarta.jms.ConnectionFactory;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * The two brokers of the parity suite, each with its own JMS provider: rebound with
 * {@code rebound-jms}, and a real Apache Artemis with Artemis's own Jakarta client. Both are
 * started on first use with the same config ({@link ParityTest#CONFIG}), once per test run, and
 * stopped by {@link #closeAll()}.
 */
enum Target {
    REBOUND {
        private Broker broker;

        @Override
        void start() {
            broker = Broker.start(ParityTest.CONFIG);
        }

        @Override
        String address() {
            return broker.address();
        }

        @Override
        ConnectionFactory factory(String address) {
            return new ReboundConnectionFactory("http://" + address);
        }

        @Override
        void kill9AndRestart() {
            broker.kill9();
            broker.restartOnSamePort();
        }

        @Override
        boolean follows(Difference difference) {
            return true;
        }

        @Override
        void close() {
            broker.close();
        }
    },
    ARTEMIS {
        private Artemis artemis;

        @Override
        void start() {
            artemis = Artemis.start(ParityTest.CONFIG);
        }

        @Override
        String address() {
            return artemis.address();
        }

        @Override
        ConnectionFactory factory(String address) {
            return new ActiveMQConnectionFactory("tcp://" + address, artemis.user(), artemis.password());
        }

        @Override
        void kill9AndRestart() {
            artemis.kill9AndRestart();
        }

        @Override
        boolean follows(Difference difference) {
            return false;
        }

        @Override
        void close() {
            artemis.close();
        }
    };

    /** Why the broker could not be started: later tests on it fail (or are skipped) the same way at once. */
    private Throwable failedToStart;
    private boolean started;

    abstract void start();

    /** {@code host:port} of the running broker. */
    abstract String address();

    /** A connection factory of the broker's JMS provider for the broker at {@code address} (itself, or a {@link Proxy} to it). */
    abstract ConnectionFactory factory(String address);

    /** SIGKILL, like a crash, then the same broker (data, port) started again. */
    abstract void kill9AndRestart();

    /** Whether this broker behaves as docs/configuration.md's "Where rebound differs from Artemis" says rebound does. */
    abstract boolean follows(Difference difference);

    abstract void close();

    /** The broker's connection factory, the broker started first if needed. */
    ConnectionFactory connectionFactory() {
        return factory(running());
    }

    /** The broker's {@code host:port}, the broker started first if needed. */
    synchronized String running() {
        if (failedToStart instanceof RuntimeException e) {
            throw e;
        }
        if (failedToStart instanceof Error e) {
            throw e;
        }
        if (!started) {
            try {
                start();
                started = true;
            } catch (RuntimeException | Error e) {
                failedToStart = e;
                throw e;
            }
        }
        return address();
    }

    static synchronized void closeAll() {
        for (Target target : values()) {
            if (target.started) {
                target.started = false;
                target.close();
            }
        }
    }

    @Override
    public String toString() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
