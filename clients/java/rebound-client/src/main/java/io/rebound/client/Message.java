package io.rebound.client;

import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.Map;
import rebound.v1.MessagingOuterClass;

/**
 * A message as the broker hands it to a consumer or a browser.
 *
 * @param id broker-assigned, unique and increasing in send order
 * @param address the address it was sent to (for a dead letter: the dead-letter address)
 * @param properties application and broker ({@code _AMQ_*}, {@code _REBOUND_*}) properties:
 *     String, Long, Double, Boolean or byte[]
 * @param timestampMs when the broker accepted it, ms since the epoch
 * @param expirationMs when it expires, ms since the epoch; 0 = never
 */
public record Message(long id, String address, byte[] body, Map<String, Object> properties, boolean durable,
        long timestampMs, int priority, long expirationMs) {

    static Message from(MessagingOuterClass.Message m) {
        return new Message(m.getMessageId(), m.getAddress(), m.getBody().toByteArray(),
                Collections.unmodifiableMap(Properties.decode(m.getPropertiesMap())), m.getDurable(),
                m.getTimestampMs(), m.getPriority(), m.getExpirationMs());
    }

    /** The body as UTF-8 text. */
    public String text() {
        return new String(body, StandardCharsets.UTF_8);
    }

    /** A property, or {@code null}. */
    public Object property(String name) {
        return properties.get(name);
    }
}
