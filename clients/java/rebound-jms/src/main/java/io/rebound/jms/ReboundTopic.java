package io.rebound.jms;

import jakarta.jms.Topic;

/** A JMS topic: the multicast address of this name; each subscription is a queue bound to it. */
public final class ReboundTopic extends ReboundDestination implements Topic {
    public ReboundTopic(String name) {
        super(name);
    }

    @Override
    public String getTopicName() {
        return name();
    }

    @Override
    String scheme() {
        return "topic";
    }
}
