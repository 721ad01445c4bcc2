package io.rebound.jms;

import io.rebound.client.Consumer;
import io.rebound.client.Delivery;
import io.rebound.client.ReboundException;
import jakarta.jms.IllegalStateException;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageListener;
import jakarta.jms.Queue;
import jakarta.jms.QueueReceiver;
import jakarta.jms.Topic;
import jakarta.jms.TopicSubscriber;
import java.lang.System.Logger.Level;
import java.time.Duration;

/**
 * A JMS consumer: one Consume stream on its queue (for a topic: its subscription's queue), with
 * the selector evaluated by the broker. It keeps the connection's prefetch of messages ahead of the
 * application, granting one credit per message handed out, so that a CLIENT_ACKNOWLEDGE or
 * transacted session may hold any number of consumed messages before it settles them.
 */
final class ReboundMessageConsumer implements QueueReceiver, TopicSubscriber {
    private static final System.Logger LOG = System.getLogger(ReboundMessageConsumer.class.getName());
    /** How often a waiting receive or listener looks up to see whether it was closed or stopped. */
    private static final Duration POLL = Duration.ofMillis(100);

    private final ReboundSession session;
    private final ReboundDestination destination;
    private final String queue;
    private final String selector;
    private final boolean deleteOnClose;
    private final Consumer consumer;
    private volatile MessageListener listener;
    private Thread dispatcher;
    private volatile boolean closed;

    ReboundMessageConsumer(ReboundSession session, ReboundDestination destination, String queue, String selector, boolean deleteOnClose)
            throws JMSException {
        this.session = session;
        this.destination = destination;
        this.queue = queue;
        this.selector = selector;
        this.deleteOnClose = deleteOnClose;
        this.consumer = Jms.call(() -> session.connection().client().consumer(queue).manualCredit(session.connection().prefetch()).filter(selector).open());
    }

    Consumer client() {
        return consumer;
    }

    /** The JMS message of a delivery; {@code acknowledge()} on it acknowledges the session's messages. */
    Message message(Delivery delivery) throws JMSException {
        Jms.run(() -> consumer.grant(1));
        return ReboundMessage.received(delivery, destination, session::acknowledgeAll);
    }

    @Override
    public String getMessageSelector() throws JMSException {
        checkOpen();
        return selector;
    }

    @Override
    public MessageListener getMessageListener() throws JMSException {
        checkOpen();
        return listener;
    }

    @Override
    public synchronized void setMessageListener(MessageListener listener) throws JMSException {
        checkOpen();
        this.listener = listener;
        if (listener != null && dispatcher == null) {
            dispatcher = new Thread(this::dispatch, "rebound-jms-listener-" + queue);
            dispatcher.setDaemon(true);
            dispatcher.start();
        }
    }

    /** Hands deliveries to the listener while the connection is started, until the consumer closes or its stream breaks. */
    private void dispatch() {
        try {
            while (!closed) {
                MessageListener current = listener;
                if (current == null || !session.connection().awaitStarted(System.nanoTime() + POLL.toNanos())) {
                    continue;
                }
                Delivery delivery = consumer.next(POLL);
                if (delivery != null) {
                    session.dispatch(this, delivery, current);
                }
            }
        } catch (ReboundException e) {
            if (!closed) {
                LOG.log(Level.WARNING, "the listener on ''{0}'' stopped: {1}", queue, e.getMessage());
                session.connection().failed(e);
            }
        } catch (JMSException e) {
            if (!closed) {
                LOG.log(Level.WARNING, "the listener on ''{0}'' stopped: {1}", queue, e.getMessage());
            }
        }
    }

    @Override
    public Message receive() throws JMSException {
        while (true) {
            Message message = receive(POLL);
            if (message != null || closed) {
                return message;
            }
        }
    }

    @Override
    public Message receive(long timeout) throws JMSException {
        return timeout == 0 ? receive() : receive(Duration.ofMillis(timeout));
    }

    @Override
    public Message receiveNoWait() throws JMSException {
        return receive(Duration.ZERO);
    }

    private Message receive(Duration timeout) throws JMSException {
        checkOpen();
        if (listener != null) {
            throw new IllegalStateException("the consumer has a MessageListener: receive is not allowed");
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        if (!session.connection().awaitStarted(deadline)) {
            return null;
        }
        Delivery delivery = Jms.call(() -> consumer.next(Duration.ofNanos(Math.max(0, deadline - System.nanoTime()))));
        if (delivery == null) {
            return null;
        }
        Message message = message(delivery);
        session.received(this, delivery);
        return message;
    }

    private void checkOpen() throws IllegalStateException {
        if (closed) {
            throw new IllegalStateException("the consumer is closed");
        }
        session.checkOpen();
    }

    /** Ends the stream gracefully: what it prefetched goes back to the queue without counting as an attempt. */
    @Override
    public void close() throws JMSException {
        if (closed) {
            return;
        }
        closed = true;
        Thread running = dispatcher;
        if (running != null && running != Thread.currentThread()) {
            try {
                running.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        session.removed(this);
        try {
            consumer.close();
            if (deleteOnClose) {
                session.connection().client().admin().deleteQueue(queue);
            }
        } catch (ReboundException e) {
            // The stream or the broker is gone: the broker returns what the consumer held.
            LOG.log(Level.DEBUG, "closing the consumer of ''{0}'': {1}", queue, e.getMessage());
        }
    }

    @Override
    public Queue getQueue() throws JMSException {
        if (destination instanceof ReboundQueue q) {
            return q;
        }
        throw new IllegalStateException("a consumer of a topic has no queue");
    }

    @Override
    public Topic getTopic() throws JMSException {
        if (destination instanceof ReboundTopic t) {
            return t;
        }
        throw new IllegalStateException("a consumer of a queue has no topic");
    }

    @Override
    public boolean getNoLocal() {
        return false;
    }
}
