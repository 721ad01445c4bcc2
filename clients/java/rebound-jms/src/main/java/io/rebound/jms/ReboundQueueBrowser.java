package io.rebound.jms;

import io.rebound.client.Admin;
import io.rebound.client.Delivery;
import io.rebound.client.ReboundClient;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;

/** A snapshot of a queue's messages (the broker's Browse call, selector included), oldest first, without consuming them. */
final class ReboundQueueBrowser implements QueueBrowser {
    /** Messages one enumeration shows, at most. */
    private static final int LIMIT = 10_000;

    private final ReboundClient client;
    private final ReboundQueue queue;
    private final String selector;

    ReboundQueueBrowser(ReboundClient client, ReboundQueue queue, String selector) {
        this.client = client;
        this.queue = queue;
        this.selector = selector;
    }

    @Override
    public Queue getQueue() {
        return queue;
    }

    @Override
    public String getMessageSelector() {
        return selector;
    }

    @Override
    public Enumeration<Message> getEnumeration() throws JMSException {
        List<Admin.BrowsedMessage> browsed = Jms.call(() -> client.admin().browse(queue.name(), LIMIT, selector == null ? "" : selector));
        List<Message> messages = new ArrayList<>(browsed.size());
        for (Admin.BrowsedMessage b : browsed) {
            Delivery asIf = new Delivery(0, b.message(), b.deliveryCount(), b.deliveryCount() > 1, queue.name());
            messages.add(ReboundMessage.received(asIf, queue, () -> { }));
        }
        return Collections.enumeration(messages);
    }

    @Override
    public void close() {
        // Nothing is held between enumerations.
    }
}
