package io.rebound.client;

import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.Map;
import rebound.v1.MessagingOuterClass;

/**
 * A message as the broker hands it to a consumer or a browser. The body and properties are
 * decoded on first use, so a consumer that reads neither pays nothing for them.
 */
public final class Message {
    private final MessagingOuterClass.Message proto;
    private Map<String, Object> properties;

    private Message(MessagingOuterClass.Message proto) {
        this.proto = proto;
    }

    static Message from(MessagingOuterClass.Message m) {
        return new Message(m);
    }

    /** Broker-assigned, unique in the broker and increasing in send order. */
    public long id() {
        return proto.getMessageId();
    }

    /** The address it was sent to (for a dead letter: the dead-letter address). */
    public String address() {
        return proto.getAddress();
    }

    /** A copy of the body. */
    public byte[] body() {
        return proto.getBody().toByteArray();
    }

    /** The body as UTF-8 text. */
    public String text() {
        return proto.getBody().toString(StandardCharsets.UTF_8);
    }

    /**
     * Application and broker ({@code _AMQ_*}, {@code _REBOUND_*}) properties: String, Long,
     * Double, Boolean or byte[]. Read-only.
     */
    public synchronized Map<String, Object> properties() {
        if (properties == null) {
            properties = Collections.unmodifiableMap(Properties.decode(proto.getPropertiesMap()));
        }
        return properties;
    }

    /** A property, or {@code null}. */
    public Object property(String name) {
        MessagingOuterClass.PropertyValue value = proto.getPropertiesMap().get(name);
        return value == null ? null : Properties.decode(value);
    }

    /** Durable messages were on disk before their send was acknowledged. */
    public boolean durable() {
        return proto.getDurable();
    }

    /** When the broker accepted it, ms since the epoch. */
    public long timestampMs() {
        return proto.getTimestampMs();
    }

    /** 0 (lowest) to 9 (highest). */
    public int priority() {
        return proto.getPriority();
    }

    /** When it expires, ms since the epoch; 0 = never. */
    public long expirationMs() {
        return proto.getExpirationMs();
    }

    @Override
    public String toString() {
        return "Message{id=" + id() + ", address=" + address() + ", " + proto.getBody().size() + " bytes, properties=" + properties() + "}";
    }
}
