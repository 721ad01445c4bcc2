package io.rebound.jms;

import jakarta.jms.Destination;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.JMSException;
import java.util.Objects;

/**
 * A queue (an anycast address with a queue of the same name) or a topic (a multicast address whose
 * subscriptions are queues), as Artemis maps them. Written as {@code queue://name} or
 * {@code topic://name} where a destination travels in a message ({@code JMSReplyTo}).
 */
public abstract sealed class ReboundDestination implements Destination permits ReboundQueue, ReboundTopic {
    private final String name;

    ReboundDestination(String name) {
        if (name == null || name.isEmpty()) {
            throw new IllegalArgumentException("a destination needs a name");
        }
        this.name = name;
    }

    /** The address (and, for a queue, the queue) name. */
    public String name() {
        return name;
    }

    abstract String scheme();

    @Override
    public String toString() {
        return scheme() + "://" + name;
    }

    static ReboundDestination parse(String text) {
        if (text.startsWith("queue://")) {
            return new ReboundQueue(text.substring("queue://".length()));
        }
        if (text.startsWith("topic://")) {
            return new ReboundTopic(text.substring("topic://".length()));
        }
        return new ReboundQueue(text);
    }

    static ReboundDestination of(Destination destination) throws JMSException {
        if (destination instanceof ReboundDestination d) {
            return d;
        }
        throw new InvalidDestinationException("not a rebound destination: " + destination + " (create it with Session.createQueue or createTopic)");
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ReboundDestination d && d.getClass() == getClass() && d.name.equals(name);
    }

    @Override
    public int hashCode() {
        return Objects.hash(getClass(), name);
    }
}
