package io.rebound.jms;

import io.rebound.client.ReboundClient;
import io.rebound.client.ReboundException;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionConsumer;
import jakarta.jms.ConnectionMetaData;
import jakarta.jms.Destination;
import jakarta.jms.ExceptionListener;
import jakarta.jms.IllegalStateException;
import jakarta.jms.InvalidClientIDException;
import jakarta.jms.JMSException;
import jakarta.jms.ServerSessionPool;
import jakarta.jms.Session;
import jakarta.jms.Topic;
import java.util.Enumeration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import rebound.v1.AdminOuterClass.RoutingType;

/**
 * A JMS connection: one {@link ReboundClient} (one HTTP/2 connection, which reconnects by itself)
 * shared by its sessions. Messages flow to consumers only while it is started.
 */
public final class ReboundConnection implements Connection {
    private final ReboundClient client;
    private final int prefetch;
    private final List<ReboundSession> sessions = new CopyOnWriteArrayList<>();
    private final List<ReboundTemporaryQueue> temporaryQueues = new CopyOnWriteArrayList<>();
    private final Object startLock = new Object();
    private boolean started;
    private volatile boolean closed;
    private String clientId;
    private boolean used;
    private ExceptionListener exceptionListener;

    ReboundConnection(ReboundClient client, int prefetch) {
        this.client = client;
        this.prefetch = prefetch;
    }

    ReboundClient client() {
        return client;
    }

    /** How many messages each consumer keeps ahead of the application ({@link ReboundConnectionFactory#setPrefetch}). */
    int prefetch() {
        return prefetch;
    }

    /** Waits until the connection is started (or {@code deadlineNanos} passes); whether it is. */
    boolean awaitStarted(long deadlineNanos) throws JMSException {
        synchronized (startLock) {
            while (!started && !closed) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    startLock.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            return started;
        }
    }

    void checkOpen() throws IllegalStateException {
        if (closed) {
            throw new IllegalStateException("the connection is closed");
        }
    }

    boolean isClosed() {
        return closed;
    }

    /** The name of a durable or shared subscription's queue, as Artemis names it: {@code clientID.name}, or {@code name} without a client id. */
    String subscriptionQueue(String subscription, boolean shared) throws JMSException {
        if (clientId == null && !shared) {
            throw new IllegalStateException("a durable subscription needs the connection's client id (Connection.setClientID)");
        }
        return clientId == null ? subscription : clientId + "." + subscription;
    }

    @Override
    public Session createSession(boolean transacted, int acknowledgeMode) throws JMSException {
        checkOpen();
        used = true;
        ReboundSession session = new ReboundSession(this, transacted, transacted ? Session.SESSION_TRANSACTED : acknowledgeMode);
        sessions.add(session);
        return session;
    }

    @Override
    public Session createSession(int sessionMode) throws JMSException {
        return createSession(sessionMode == Session.SESSION_TRANSACTED, sessionMode);
    }

    @Override
    public Session createSession() throws JMSException {
        return createSession(false, Session.AUTO_ACKNOWLEDGE);
    }

    void removed(ReboundSession session) {
        sessions.remove(session);
    }

    ReboundTemporaryQueue createTemporaryQueue() throws JMSException {
        ReboundTemporaryQueue queue = new ReboundTemporaryQueue(this, "rebound.temp." + UUID.randomUUID());
        Jms.run(() -> client.admin().createQueue(queue.name(), queue.name(), RoutingType.ROUTING_TYPE_ANYCAST, false));
        temporaryQueues.add(queue);
        return queue;
    }

    void deleteTemporaryQueue(ReboundTemporaryQueue queue) throws JMSException {
        temporaryQueues.remove(queue);
        Jms.run(() -> client.admin().deleteQueue(queue.name()));
    }

    @Override
    public String getClientID() {
        return clientId;
    }

    @Override
    public void setClientID(String clientID) throws JMSException {
        if (used || clientId != null) {
            throw new IllegalStateException("the client id must be set before the connection is used, and only once");
        }
        if (clientID == null || clientID.isEmpty() || clientID.contains(".")) {
            throw new InvalidClientIDException("a client id must be non-empty and without '.': " + clientID);
        }
        this.clientId = clientID;
    }

    @Override
    public ConnectionMetaData getMetaData() {
        return MetaData.INSTANCE;
    }

    @Override
    public ExceptionListener getExceptionListener() {
        return exceptionListener;
    }

    @Override
    public void setExceptionListener(ExceptionListener listener) {
        this.exceptionListener = listener;
    }

    /** Tells the exception listener, if any, that a consumer's stream broke. */
    void failed(ReboundException e) {
        ExceptionListener listener = exceptionListener;
        if (listener != null) {
            listener.onException(Jms.wrap(e));
        }
    }

    @Override
    public void start() throws JMSException {
        checkOpen();
        used = true;
        synchronized (startLock) {
            started = true;
            startLock.notifyAll();
        }
    }

    @Override
    public void stop() throws JMSException {
        checkOpen();
        synchronized (startLock) {
            started = false;
        }
    }

    @Override
    public void close() throws JMSException {
        if (closed) {
            return;
        }
        for (ReboundSession session : sessions) {
            session.close();
        }
        for (ReboundTemporaryQueue queue : temporaryQueues) {
            try {
                queue.delete();
            } catch (JMSException e) {
                // The broker is gone: a non-durable queue goes with it.
            }
        }
        synchronized (startLock) {
            closed = true;
            startLock.notifyAll();
        }
        client.close();
    }

    @Override
    public ConnectionConsumer createConnectionConsumer(Destination destination, String messageSelector, ServerSessionPool sessionPool, int maxMessages)
            throws JMSException {
        throw Jms.unsupported("ConnectionConsumer (application server integration)");
    }

    @Override
    public ConnectionConsumer createSharedConnectionConsumer(Topic topic, String subscriptionName, String messageSelector, ServerSessionPool sessionPool,
            int maxMessages) throws JMSException {
        throw Jms.unsupported("ConnectionConsumer (application server integration)");
    }

    @Override
    public ConnectionConsumer createDurableConnectionConsumer(Topic topic, String subscriptionName, String messageSelector, ServerSessionPool sessionPool,
            int maxMessages) throws JMSException {
        throw Jms.unsupported("ConnectionConsumer (application server integration)");
    }

    @Override
    public ConnectionConsumer createSharedDurableConnectionConsumer(Topic topic, String subscriptionName, String messageSelector,
            ServerSessionPool sessionPool, int maxMessages) throws JMSException {
        throw Jms.unsupported("ConnectionConsumer (application server integration)");
    }

    /** The provider's metadata. */
    private enum MetaData implements ConnectionMetaData {
        INSTANCE;

        @Override
        public String getJMSVersion() {
            return "3.1";
        }

        @Override
        public int getJMSMajorVersion() {
            return 3;
        }

        @Override
        public int getJMSMinorVersion() {
            return 1;
        }

        @Override
        public String getJMSProviderName() {
            return "rebound";
        }

        @Override
        public String getProviderVersion() {
            return "0.1";
        }

        @Override
        public int getProviderMajorVersion() {
            return 0;
        }

        @Override
        public int getProviderMinorVersion() {
            return 1;
        }

        @Override
        public Enumeration<String> getJMSXPropertyNames() {
            return java.util.Collections.enumeration(List.of("JMSXDeliveryCount", "JMSXGroupID"));
        }
    }
}
