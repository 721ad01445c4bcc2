package io.rebound.jms;

import io.rebound.client.OutgoingMessage;
import io.rebound.client.ReboundException;
import jakarta.jms.CompletionListener;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Destination;
import jakarta.jms.IllegalStateException;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageFormatException;
import jakarta.jms.MessageProducer;

/**
 * A JMS producer. A send returns once the broker has the message (on disk if persistent); in a
 * transacted session it joins the session's transaction. A send with a {@link CompletionListener}
 * goes through the connection's shared Publish stream, batched with the other sends in flight, and
 * the listener is called once the broker has stored it (or with why not: a broken stream means
 * the message may or may not have been stored).
 */
final class ReboundMessageProducer implements MessageProducer {
    private final ReboundSession session;
    private final ReboundDestination destination;
    private int deliveryMode = DeliveryMode.PERSISTENT;
    private int priority = Message.DEFAULT_PRIORITY;
    private long timeToLive = Message.DEFAULT_TIME_TO_LIVE;
    private long deliveryDelay = Message.DEFAULT_DELIVERY_DELAY;
    private boolean disableMessageId;
    private boolean disableTimestamp;
    private volatile boolean closed;

    ReboundMessageProducer(ReboundSession session, ReboundDestination destination) {
        this.session = session;
        this.destination = destination;
    }

    @Override
    public void send(Message message) throws JMSException {
        send(destination(), message, deliveryMode, priority, timeToLive, null);
    }

    @Override
    public void send(Message message, int mode, int prio, long ttl) throws JMSException {
        send(destination(), message, mode, prio, ttl, null);
    }

    @Override
    public void send(Destination to, Message message) throws JMSException {
        send(explicit(to), message, deliveryMode, priority, timeToLive, null);
    }

    @Override
    public void send(Destination to, Message message, int mode, int prio, long ttl) throws JMSException {
        send(explicit(to), message, mode, prio, ttl, null);
    }

    @Override
    public void send(Message message, CompletionListener listener) throws JMSException {
        send(destination(), message, deliveryMode, priority, timeToLive, required(listener));
    }

    @Override
    public void send(Message message, int mode, int prio, long ttl, CompletionListener listener) throws JMSException {
        send(destination(), message, mode, prio, ttl, required(listener));
    }

    @Override
    public void send(Destination to, Message message, CompletionListener listener) throws JMSException {
        send(explicit(to), message, deliveryMode, priority, timeToLive, required(listener));
    }

    @Override
    public void send(Destination to, Message message, int mode, int prio, long ttl, CompletionListener listener) throws JMSException {
        send(explicit(to), message, mode, prio, ttl, required(listener));
    }

    private static CompletionListener required(CompletionListener listener) {
        if (listener == null) {
            throw new IllegalArgumentException("the CompletionListener must not be null");
        }
        return listener;
    }

    private ReboundDestination destination() throws JMSException {
        if (destination == null) {
            throw new UnsupportedOperationException("this producer has no destination: name one in send");
        }
        return destination;
    }

    private ReboundDestination explicit(Destination to) throws JMSException {
        if (destination != null) {
            throw new UnsupportedOperationException("this producer has a destination: send(Message) to it");
        }
        if (to == null) {
            throw new InvalidDestinationException("no destination");
        }
        return ReboundDestination.of(to);
    }

    private void send(ReboundDestination to, Message message, int mode, int prio, long ttl, CompletionListener listener) throws JMSException {
        if (closed) {
            throw new IllegalStateException("the producer is closed");
        }
        session.checkOpen();
        if (!(message instanceof ReboundMessage m)) {
            throw new MessageFormatException("only messages created by rebound's JMS provider can be sent, not a " + message.getClass().getName());
        }
        if (mode != DeliveryMode.PERSISTENT && mode != DeliveryMode.NON_PERSISTENT) {
            throw new JMSException("unknown delivery mode " + mode);
        }
        if (to instanceof ReboundTopic topic) {
            session.ensureTopic(topic);
        }
        long now = System.currentTimeMillis();
        long expiration = ttl > 0 ? now + ttl : 0;
        m.prepareSend(mode, prio, expiration);
        OutgoingMessage out = m.toOutgoing(to, deliveryDelay);
        long deliveryTime = now + deliveryDelay;
        if (listener != null && !session.getTransacted()) {
            session.connection().client().sendAsync(out).whenComplete((id, error) -> {
                if (error == null) {
                    m.sent(id, to, mode, prio, now, expiration, deliveryTime);
                    listener.onCompletion(m);
                } else {
                    listener.onException(m, error instanceof ReboundException e ? Jms.wrap(e) : new JMSException(error.toString()));
                }
            });
            return;
        }
        long id = session.getTransacted()
                ? Jms.call(() -> session.transaction().send(out))
                : Jms.call(() -> session.connection().client().send(out));
        m.sent(id, to, mode, prio, now, expiration, deliveryTime);
        if (listener != null) {
            listener.onCompletion(m);
        }
    }

    @Override
    public void setDisableMessageID(boolean value) {
        disableMessageId = value;
    }

    @Override
    public boolean getDisableMessageID() {
        return disableMessageId;
    }

    @Override
    public void setDisableMessageTimestamp(boolean value) {
        disableTimestamp = value;
    }

    @Override
    public boolean getDisableMessageTimestamp() {
        return disableTimestamp;
    }

    @Override
    public void setDeliveryMode(int deliveryMode) {
        this.deliveryMode = deliveryMode;
    }

    @Override
    public int getDeliveryMode() {
        return deliveryMode;
    }

    @Override
    public void setPriority(int priority) {
        this.priority = priority;
    }

    @Override
    public int getPriority() {
        return priority;
    }

    @Override
    public void setTimeToLive(long timeToLive) {
        this.timeToLive = timeToLive;
    }

    @Override
    public long getTimeToLive() {
        return timeToLive;
    }

    @Override
    public void setDeliveryDelay(long deliveryDelay) {
        this.deliveryDelay = deliveryDelay;
    }

    @Override
    public long getDeliveryDelay() {
        return deliveryDelay;
    }

    @Override
    public Destination getDestination() {
        return destination;
    }

    @Override
    public void close() {
        closed = true;
    }
}
