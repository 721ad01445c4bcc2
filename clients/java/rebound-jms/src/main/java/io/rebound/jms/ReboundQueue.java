package io.rebound.jms;

import jakarta.jms.Queue;

/** A JMS queue: the anycast address and queue of this name. */
public sealed class ReboundQueue extends ReboundDestination implements Queue permits ReboundTemporaryQueue {
    public ReboundQueue(String name) {
        super(name);
    }

    @Override
    public String getQueueName() {
        return name();
    }

    @Override
    String scheme() {
        return "queue";
    }
}
