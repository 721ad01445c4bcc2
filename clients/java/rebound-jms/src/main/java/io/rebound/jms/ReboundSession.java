package io.rebound.jms;

import io.grpc.Status;
import io.rebound.client.Delivery;
import io.rebound.client.ReboundException;
import io.rebound.client.Transaction;
import jakarta.jms.BytesMessage;
import jakarta.jms.Destination;
import jakarta.jms.IllegalStateException;
import jakarta.jms.JMSException;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageListener;
import jakarta.jms.MessageProducer;
import jakarta.jms.ObjectMessage;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;
import jakarta.jms.Session;
import jakarta.jms.StreamMessage;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.TemporaryTopic;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import jakarta.jms.TopicSubscriber;
import jakarta.jms.TransactionRolledBackException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import rebound.v1.AdminOuterClass.RoutingType;

/**
 * A JMS session. Acknowledgement modes map onto settles: {@code AUTO_ACKNOWLEDGE} and
 * {@code DUPS_OK_ACKNOWLEDGE} ack each message once {@code receive} returns it or its listener
 * returns (a listener that throws gets it again, counted as a failed attempt);
 * {@code CLIENT_ACKNOWLEDGE} acks every message the session consumed so far at
 * {@link Message#acknowledge()}, and {@link #recover()} nacks them; {@code SESSION_TRANSACTED} sends
 * and acks in a broker transaction (one Transact stream per session), and a rollback returns the
 * consumed messages with the broker's redelivery delay. Deliveries to the session's listeners are
 * serialized, as JMS requires.
 */
final class ReboundSession implements Session {
    private final ReboundConnection connection;
    private final boolean transacted;
    private final int acknowledgeMode;
    /** Serializes listener deliveries and guards the transaction and the unacknowledged messages. */
    final Object lock = new Object();
    private io.rebound.client.Session transactSession;
    private Transaction transaction;
    /** CLIENT_ACKNOWLEDGE: what the session consumed and has not acknowledged, per consumer. */
    private final Map<ReboundMessageConsumer, List<Long>> unacknowledged = new LinkedHashMap<>();
    private final List<ReboundMessageConsumer> consumers = new CopyOnWriteArrayList<>();
    private volatile boolean closed;

    ReboundSession(ReboundConnection connection, boolean transacted, int acknowledgeMode) throws JMSException {
        switch (acknowledgeMode) {
            case AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE, DUPS_OK_ACKNOWLEDGE, SESSION_TRANSACTED -> { }
            default -> throw new JMSException("unknown acknowledge mode " + acknowledgeMode);
        }
        this.connection = connection;
        this.transacted = transacted;
        this.acknowledgeMode = acknowledgeMode;
    }

    ReboundConnection connection() {
        return connection;
    }

    void checkOpen() throws IllegalStateException {
        if (closed) {
            throw new IllegalStateException("the session is closed");
        }
        connection.checkOpen();
    }

    /** The session's current broker transaction, begun on first use. */
    Transaction transaction() throws JMSException {
        synchronized (lock) {
            if (transaction == null) {
                Jms.run(() -> {
                    if (transactSession == null || !transactSession.isOpen()) {
                        transactSession = connection.client().session();
                    }
                    transaction = transactSession.begin();
                });
            }
            return transaction;
        }
    }

    /** What consuming {@code delivery} means in this session's mode, once the application has it ({@code receive}) or before its listener runs. */
    void consumed(ReboundMessageConsumer consumer, Delivery delivery) throws JMSException {
        synchronized (lock) {
            switch (acknowledgeMode) {
                case SESSION_TRANSACTED -> {
                    Transaction tx = transaction();
                    Jms.run(() -> consumer.client().ackIn(tx, delivery.id()));
                }
                case CLIENT_ACKNOWLEDGE -> unacknowledged.computeIfAbsent(consumer, c -> new ArrayList<>()).add(delivery.id());
                default -> { }
            }
        }
    }

    /** Runs a listener on a delivery, serialized with the session's other listeners, and settles it as the mode says. */
    void dispatch(ReboundMessageConsumer consumer, Delivery delivery, MessageListener listener) throws JMSException {
        synchronized (lock) {
            Message message = consumer.message(delivery);
            consumed(consumer, delivery);
            boolean auto = acknowledgeMode == AUTO_ACKNOWLEDGE || acknowledgeMode == DUPS_OK_ACKNOWLEDGE;
            try {
                listener.onMessage(message);
            } catch (RuntimeException e) {
                if (auto) {
                    // JMS: a listener that throws in an auto-acknowledge session gets the message again.
                    Jms.run(() -> consumer.client().nack("the message listener threw " + e, delivery.id()));
                }
                return;
            }
            if (auto) {
                Jms.run(() -> consumer.client().ack(delivery.id()));
            }
        }
    }

    /** {@code receive} in an auto-acknowledge session acknowledges what it returns. */
    void received(ReboundMessageConsumer consumer, Delivery delivery) throws JMSException {
        consumed(consumer, delivery);
        if (acknowledgeMode == AUTO_ACKNOWLEDGE || acknowledgeMode == DUPS_OK_ACKNOWLEDGE) {
            Jms.run(() -> consumer.client().ack(delivery.id()));
        }
    }

    /** CLIENT_ACKNOWLEDGE: acknowledges every message the session consumed so far, on all its consumers. */
    void acknowledgeAll() throws JMSException {
        if (acknowledgeMode != CLIENT_ACKNOWLEDGE) {
            return;
        }
        synchronized (lock) {
            checkOpen();
            for (Map.Entry<ReboundMessageConsumer, List<Long>> e : unacknowledged.entrySet()) {
                long[] ids = e.getValue().stream().mapToLong(Long::longValue).toArray();
                Jms.run(() -> {
                    e.getKey().client().ack(ids);
                    e.getKey().client().flush();
                });
            }
            unacknowledged.clear();
        }
    }

    @Override
    public void commit() throws JMSException {
        checkOpen();
        if (!transacted) {
            throw new IllegalStateException("commit() on a session that is not transacted");
        }
        synchronized (lock) {
            Transaction tx = transaction;
            transaction = null;
            if (tx == null) {
                return;
            }
            try {
                tx.commit();
            } catch (ReboundException e) {
                TransactionRolledBackException rolledBack = new TransactionRolledBackException("the commit failed and the transaction was rolled back: "
                        + e.getMessage(), e.code().name());
                rolledBack.setLinkedException(e);
                throw rolledBack;
            }
        }
    }

    @Override
    public void rollback() throws JMSException {
        checkOpen();
        if (!transacted) {
            throw new IllegalStateException("rollback() on a session that is not transacted");
        }
        synchronized (lock) {
            Transaction tx = transaction;
            transaction = null;
            if (tx != null) {
                Jms.run(tx::rollback);
            }
        }
    }

    @Override
    public void recover() throws JMSException {
        checkOpen();
        if (transacted) {
            throw new IllegalStateException("recover() on a transacted session: use rollback()");
        }
        synchronized (lock) {
            for (Map.Entry<ReboundMessageConsumer, List<Long>> e : unacknowledged.entrySet()) {
                long[] ids = e.getValue().stream().mapToLong(Long::longValue).toArray();
                Jms.run(() -> e.getKey().client().nack("session recovered", ids));
            }
            unacknowledged.clear();
        }
    }

    @Override
    public void close() throws JMSException {
        if (closed) {
            return;
        }
        for (ReboundMessageConsumer consumer : consumers) {
            consumer.close();
        }
        synchronized (lock) {
            closed = true;
            if (transaction != null) {
                try {
                    transaction.rollback();
                } catch (ReboundException e) {
                    // The session's stream is gone: the broker rolled it back.
                }
                transaction = null;
            }
            if (transactSession != null) {
                transactSession.close();
            }
        }
        connection.removed(this);
    }

    void removed(ReboundMessageConsumer consumer) {
        consumers.remove(consumer);
        synchronized (lock) {
            unacknowledged.remove(consumer);
        }
    }

    @Override
    public boolean getTransacted() throws JMSException {
        checkOpen();
        return transacted;
    }

    @Override
    public int getAcknowledgeMode() throws JMSException {
        checkOpen();
        return acknowledgeMode;
    }

    @Override
    public BytesMessage createBytesMessage() throws JMSException {
        checkOpen();
        return new ReboundBytesMessage();
    }

    @Override
    public MapMessage createMapMessage() throws JMSException {
        checkOpen();
        return new ReboundMapMessage();
    }

    @Override
    public Message createMessage() throws JMSException {
        checkOpen();
        return new ReboundMessage();
    }

    @Override
    public ObjectMessage createObjectMessage() throws JMSException {
        throw Jms.unsupported("ObjectMessage (Java deserialization of message bodies is a known remote-code-execution hazard; send JSON in a TextMessage)");
    }

    @Override
    public ObjectMessage createObjectMessage(Serializable object) throws JMSException {
        return createObjectMessage();
    }

    @Override
    public StreamMessage createStreamMessage() throws JMSException {
        checkOpen();
        return new ReboundStreamMessage();
    }

    @Override
    public TextMessage createTextMessage() throws JMSException {
        checkOpen();
        return new ReboundTextMessage();
    }

    @Override
    public TextMessage createTextMessage(String text) throws JMSException {
        TextMessage message = createTextMessage();
        message.setText(text);
        return message;
    }

    @Override
    public MessageListener getMessageListener() throws JMSException {
        throw Jms.unsupported("a session-wide MessageListener (set one on each MessageConsumer)");
    }

    @Override
    public void setMessageListener(MessageListener listener) throws JMSException {
        throw Jms.unsupported("a session-wide MessageListener (set one on each MessageConsumer)");
    }

    @Override
    public void run() {
        throw new UnsupportedOperationException("Session.run is for application servers, which rebound's JMS provider does not integrate with");
    }

    @Override
    public MessageProducer createProducer(Destination destination) throws JMSException {
        checkOpen();
        return new ReboundMessageProducer(this, destination == null ? null : ReboundDestination.of(destination));
    }

    @Override
    public MessageConsumer createConsumer(Destination destination) throws JMSException {
        return createConsumer(destination, null, false);
    }

    @Override
    public MessageConsumer createConsumer(Destination destination, String messageSelector) throws JMSException {
        return createConsumer(destination, messageSelector, false);
    }

    @Override
    public MessageConsumer createConsumer(Destination destination, String messageSelector, boolean noLocal) throws JMSException {
        checkOpen();
        if (noLocal) {
            throw Jms.unsupported("noLocal");
        }
        ReboundDestination d = ReboundDestination.of(destination);
        if (d instanceof ReboundTopic topic) {
            // A non-durable subscription: a queue of its own on the topic, gone with the consumer.
            String queue = "rebound.sub." + UUID.randomUUID();
            subscribe(topic, queue, false);
            return consumer(d, queue, messageSelector, true);
        }
        return consumer(d, d.name(), messageSelector, false);
    }

    private ReboundMessageConsumer consumer(ReboundDestination destination, String queue, String selector, boolean deleteOnClose) throws JMSException {
        ReboundMessageConsumer consumer = new ReboundMessageConsumer(this, destination, queue, selector, deleteOnClose);
        consumers.add(consumer);
        return consumer;
    }

    /** Makes the topic a multicast address and {@code queue} a subscription of it (kept if it exists). */
    void subscribe(ReboundTopic topic, String queue, boolean durable) throws JMSException {
        ensureTopic(topic);
        try {
            connection.client().admin().createQueue(topic.name(), queue, RoutingType.ROUTING_TYPE_MULTICAST, durable);
        } catch (ReboundException e) {
            if (e.code() != Status.Code.ALREADY_EXISTS) {
                throw Jms.wrap(e);
            }
        }
    }

    /** Sends to a topic need its multicast address: without it the broker would create an anycast one. */
    void ensureTopic(ReboundTopic topic) throws JMSException {
        Jms.run(() -> connection.client().admin().createAddress(topic.name(), RoutingType.ROUTING_TYPE_MULTICAST));
    }

    @Override
    public MessageConsumer createSharedConsumer(Topic topic, String sharedSubscriptionName) throws JMSException {
        return createSharedConsumer(topic, sharedSubscriptionName, null);
    }

    @Override
    public MessageConsumer createSharedConsumer(Topic topic, String sharedSubscriptionName, String messageSelector) throws JMSException {
        checkOpen();
        String queue = connection.subscriptionQueue(sharedSubscriptionName, true);
        subscribe((ReboundTopic) ReboundDestination.of(topic), queue, false);
        return consumer(ReboundDestination.of(topic), queue, messageSelector, false);
    }

    @Override
    public Queue createQueue(String queueName) throws JMSException {
        checkOpen();
        return new ReboundQueue(queueName);
    }

    @Override
    public Topic createTopic(String topicName) throws JMSException {
        checkOpen();
        return new ReboundTopic(topicName);
    }

    @Override
    public TopicSubscriber createDurableSubscriber(Topic topic, String name) throws JMSException {
        return createDurableSubscriber(topic, name, null, false);
    }

    @Override
    public TopicSubscriber createDurableSubscriber(Topic topic, String name, String messageSelector, boolean noLocal) throws JMSException {
        checkOpen();
        if (noLocal) {
            throw Jms.unsupported("noLocal");
        }
        String queue = connection.subscriptionQueue(name, false);
        subscribe((ReboundTopic) ReboundDestination.of(topic), queue, true);
        return consumer(ReboundDestination.of(topic), queue, messageSelector, false);
    }

    @Override
    public MessageConsumer createDurableConsumer(Topic topic, String name) throws JMSException {
        return createDurableSubscriber(topic, name, null, false);
    }

    @Override
    public MessageConsumer createDurableConsumer(Topic topic, String name, String messageSelector, boolean noLocal) throws JMSException {
        return createDurableSubscriber(topic, name, messageSelector, noLocal);
    }

    @Override
    public MessageConsumer createSharedDurableConsumer(Topic topic, String name) throws JMSException {
        return createSharedDurableConsumer(topic, name, null);
    }

    @Override
    public MessageConsumer createSharedDurableConsumer(Topic topic, String name, String messageSelector) throws JMSException {
        checkOpen();
        String queue = connection.subscriptionQueue(name, true);
        subscribe((ReboundTopic) ReboundDestination.of(topic), queue, true);
        return consumer(ReboundDestination.of(topic), queue, messageSelector, false);
    }

    @Override
    public QueueBrowser createBrowser(Queue queue) throws JMSException {
        return createBrowser(queue, null);
    }

    @Override
    public QueueBrowser createBrowser(Queue queue, String messageSelector) throws JMSException {
        checkOpen();
        return new ReboundQueueBrowser(connection.client(), (ReboundQueue) ReboundDestination.of(queue), messageSelector);
    }

    @Override
    public TemporaryQueue createTemporaryQueue() throws JMSException {
        checkOpen();
        return connection.createTemporaryQueue();
    }

    @Override
    public TemporaryTopic createTemporaryTopic() throws JMSException {
        throw Jms.unsupported("TemporaryTopic");
    }

    @Override
    public void unsubscribe(String name) throws JMSException {
        checkOpen();
        String queue = connection.getClientID() == null ? name : connection.getClientID() + "." + name;
        Jms.run(() -> connection.client().admin().deleteQueue(queue));
    }
}
