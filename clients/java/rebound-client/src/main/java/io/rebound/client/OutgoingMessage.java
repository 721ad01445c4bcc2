package io.rebound.client;

import com.google.protobuf.ByteString;
import java.nio.charset.StandardCharsets;
import rebound.v1.MessagingOuterClass;

/**
 * A message to send, built fluently: {@code new OutgoingMessage("orders", "hello").property("tenant", "acme")}.
 * Durable, priority 4 and no expiration unless set.
 */
public final class OutgoingMessage {
    private final MessagingOuterClass.OutgoingMessage.Builder proto;

    public OutgoingMessage(String address, byte[] body) {
        proto = MessagingOuterClass.OutgoingMessage.newBuilder().setAddress(address).setBody(ByteString.copyFrom(body));
    }

    public OutgoingMessage(String address, String body) {
        this(address, body.getBytes(StandardCharsets.UTF_8));
    }

    /** A typed property: {@code String}, {@code Long}/{@code Integer}/{@code Short}/{@code Byte}, {@code Double}/{@code Float}, {@code Boolean} or {@code byte[]}. */
    public OutgoingMessage property(String name, Object value) {
        proto.putProperties(name, Properties.encode(name, value));
        return this;
    }

    /** Joins the message group {@code group} ({@code _AMQ_GROUP_ID}): delivered in order to one consumer. */
    public OutgoingMessage group(String group) {
        return property("_AMQ_GROUP_ID", group);
    }

    public OutgoingMessage durable(boolean durable) {
        proto.setDurable(durable);
        return this;
    }

    /** 0 (lowest) to 9 (highest). */
    public OutgoingMessage priority(int priority) {
        if (priority < 0 || priority > 9) {
            throw new IllegalArgumentException("priority " + priority + " is not in 0..9");
        }
        proto.setPriority(priority);
        return this;
    }

    /** Absolute expiration, ms since the epoch; 0 = never. */
    public OutgoingMessage expirationMs(long expirationMs) {
        proto.setExpirationMs(expirationMs);
        return this;
    }

    /** Scheduled delivery: not before this time, ms since the epoch. */
    public OutgoingMessage deliverAtMs(long deliverAtMs) {
        proto.setDeliverAtMs(deliverAtMs);
        return this;
    }

    /** Scheduled delivery after this many ms, on the broker's clock. */
    public OutgoingMessage delayMs(long delayMs) {
        proto.setDelayMs(delayMs);
        return this;
    }

    /** Duplicate detection: the address stores a message with an id it remembers only once. */
    public OutgoingMessage duplicateId(String id) {
        proto.setDuplicateId(id);
        return this;
    }

    public String address() {
        return proto.getAddress();
    }

    MessagingOuterClass.OutgoingMessage toProto() {
        return proto.build();
    }
}
