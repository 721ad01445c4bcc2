package io.rebound.jms;

import jakarta.jms.JMSException;
import jakarta.jms.TemporaryQueue;

/** A non-durable queue of a random name that lives as long as its connection. */
final class ReboundTemporaryQueue extends ReboundQueue implements TemporaryQueue {
    private final ReboundConnection connection;

    ReboundTemporaryQueue(ReboundConnection connection, String name) {
        super(name);
        this.connection = connection;
    }

    @Override
    public void delete() throws JMSException {
        connection.deleteTemporaryQueue(this);
    }
}
