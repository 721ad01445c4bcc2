package io.rebound.jms;

import io.rebound.client.OutgoingMessage;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageFormatException;
import jakarta.jms.MessageNotWriteableException;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A JMS message with no body, and the base of the typed ones. Headers map onto the broker's
 * message: {@code JMSMessageID} is {@code ID:} + the broker's id, {@code JMSTimestamp},
 * {@code JMSExpiration}, {@code JMSPriority} and {@code JMSDeliveryMode} (durable) are the
 * message's own fields; {@code JMSCorrelationID}, {@code JMSType} and {@code JMSReplyTo} travel as
 * properties of those names; {@code JMSXDeliveryCount} and {@code JMSRedelivered} come from the
 * delivery.
 */
public class ReboundMessage implements Message {
    /** The property naming the JMS body type, so that any JMS consumer rebuilds the same kind of message. */
    static final String BODY_TYPE = "JMS_Rebound_BodyType";
    static final String CORRELATION_ID = "JMSCorrelationID";
    static final String TYPE = "JMSType";
    static final String REPLY_TO = "JMSReplyTo";
    static final String DELIVERY_COUNT = "JMSXDeliveryCount";
    private static final String SCHEDULED = "_AMQ_SCHED_DELIVERY";

    private String messageId;
    private long timestamp;
    private String correlationId;
    private Destination replyTo;
    private Destination destination;
    private int deliveryMode = DeliveryMode.PERSISTENT;
    private boolean redelivered;
    private String type;
    private long expiration;
    private long deliveryTime;
    private int priority = Message.DEFAULT_PRIORITY;
    private int deliveryCount;
    private final Map<String, Object> properties = new LinkedHashMap<>();
    private boolean propertiesReadOnly;
    protected boolean bodyReadOnly;
    /** Acknowledges for a CLIENT_ACKNOWLEDGE session; a no-op otherwise. */
    private Acknowledger acknowledger = () -> { };

    /** What {@link #acknowledge()} does: acknowledges every message the session consumed so far. */
    @FunctionalInterface
    interface Acknowledger {
        void acknowledge() throws JMSException;
    }

    String bodyType() {
        return "message";
    }

    byte[] encodeBody() throws JMSException {
        return new byte[0];
    }

    void decodeBody(byte[] body) throws JMSException {
        // No body.
    }

    /** This message as the client sends it to {@code destination}; its headers as the producer set them. */
    OutgoingMessage toOutgoing(ReboundDestination destination, long deliveryDelay) throws JMSException {
        OutgoingMessage out = new OutgoingMessage(destination.name(), encodeBody());
        try {
            properties.forEach(out::property);
        } catch (IllegalArgumentException e) {
            throw new MessageFormatException(e.getMessage());
        }
        if (!(this instanceof ReboundBytesMessage)) {
            // Without it a message is a BytesMessage, as one from another client is: not sent, not stored.
            out.property(BODY_TYPE, bodyType());
        }
        if (correlationId != null) {
            out.property(CORRELATION_ID, correlationId);
        }
        if (type != null) {
            out.property(TYPE, type);
        }
        if (replyTo != null) {
            out.property(REPLY_TO, ReboundDestination.of(replyTo).toString());
        }
        out.durable(deliveryMode == DeliveryMode.PERSISTENT).priority(priority);
        if (expiration > 0) {
            out.expirationMs(expiration);
        }
        if (deliveryDelay > 0) {
            out.delayMs(deliveryDelay);
        }
        return out;
    }

    /** A received message of the type its sender chose, read-only, with its headers from the broker. */
    static ReboundMessage received(io.rebound.client.Delivery delivery, ReboundDestination from, Acknowledger acknowledger) throws JMSException {
        io.rebound.client.Message m = delivery.message();
        ReboundMessage message = switch (String.valueOf(m.property(BODY_TYPE))) {
            case "text" -> new ReboundTextMessage();
            case "map" -> new ReboundMapMessage();
            case "stream" -> new ReboundStreamMessage();
            case "message" -> new ReboundMessage();
            default -> new ReboundBytesMessage();
        };
        message.decodeBody(m.body());
        message.messageId = "ID:" + m.id();
        message.timestamp = m.timestampMs();
        message.expiration = m.expirationMs();
        message.priority = m.priority();
        message.deliveryMode = m.durable() ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT;
        message.destination = from;
        message.redelivered = delivery.redelivered();
        message.deliveryCount = delivery.deliveryCount();
        message.deliveryTime = m.property(SCHEDULED) instanceof Long at ? at : m.timestampMs();
        m.properties().forEach((name, value) -> {
            switch (name) {
                case CORRELATION_ID -> message.correlationId = String.valueOf(value);
                case TYPE -> message.type = String.valueOf(value);
                case REPLY_TO -> message.replyTo = ReboundDestination.parse(String.valueOf(value));
                case BODY_TYPE -> { }
                default -> message.properties.put(name, value);
            }
        });
        message.propertiesReadOnly = true;
        message.bodyReadOnly = true;
        message.acknowledger = acknowledger;
        return message;
    }

    /** The headers the provider sets on send. */
    void sent(long id, ReboundDestination to, int mode, int prio, long timestampMs, long expirationMs, long deliveryTimeMs) {
        this.messageId = "ID:" + id;
        this.destination = to;
        this.deliveryMode = mode;
        this.priority = prio;
        this.timestamp = timestampMs;
        this.expiration = expirationMs;
        this.deliveryTime = deliveryTimeMs;
    }

    void prepareSend(int mode, int prio, long expirationMs) {
        this.deliveryMode = mode;
        this.priority = prio;
        this.expiration = expirationMs;
    }

    @Override
    public String getJMSMessageID() {
        return messageId;
    }

    @Override
    public void setJMSMessageID(String id) {
        this.messageId = id;
    }

    @Override
    public long getJMSTimestamp() {
        return timestamp;
    }

    @Override
    public void setJMSTimestamp(long timestamp) {
        this.timestamp = timestamp;
    }

    @Override
    public byte[] getJMSCorrelationIDAsBytes() {
        return correlationId == null ? null : correlationId.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public void setJMSCorrelationIDAsBytes(byte[] correlationId) {
        this.correlationId = correlationId == null ? null : new String(correlationId, StandardCharsets.UTF_8);
    }

    @Override
    public void setJMSCorrelationID(String correlationId) {
        this.correlationId = correlationId;
    }

    @Override
    public String getJMSCorrelationID() {
        return correlationId;
    }

    @Override
    public Destination getJMSReplyTo() {
        return replyTo;
    }

    @Override
    public void setJMSReplyTo(Destination replyTo) {
        this.replyTo = replyTo;
    }

    @Override
    public Destination getJMSDestination() {
        return destination;
    }

    @Override
    public void setJMSDestination(Destination destination) {
        this.destination = destination;
    }

    @Override
    public int getJMSDeliveryMode() {
        return deliveryMode;
    }

    @Override
    public void setJMSDeliveryMode(int deliveryMode) {
        this.deliveryMode = deliveryMode;
    }

    @Override
    public boolean getJMSRedelivered() {
        return redelivered;
    }

    @Override
    public void setJMSRedelivered(boolean redelivered) {
        this.redelivered = redelivered;
    }

    @Override
    public String getJMSType() {
        return type;
    }

    @Override
    public void setJMSType(String type) {
        this.type = type;
    }

    @Override
    public long getJMSExpiration() {
        return expiration;
    }

    @Override
    public void setJMSExpiration(long expiration) {
        this.expiration = expiration;
    }

    @Override
    public long getJMSDeliveryTime() {
        return deliveryTime;
    }

    @Override
    public void setJMSDeliveryTime(long deliveryTime) {
        this.deliveryTime = deliveryTime;
    }

    @Override
    public int getJMSPriority() {
        return priority;
    }

    @Override
    public void setJMSPriority(int priority) {
        this.priority = priority;
    }

    @Override
    public void clearProperties() {
        properties.clear();
        propertiesReadOnly = false;
    }

    @Override
    public boolean propertyExists(String name) {
        return properties.containsKey(name) || (DELIVERY_COUNT.equals(name) && deliveryCount > 0);
    }

    @Override
    public boolean getBooleanProperty(String name) throws JMSException {
        return Values.toBoolean(getObjectProperty(name));
    }

    @Override
    public byte getByteProperty(String name) throws JMSException {
        return Values.toByte(getObjectProperty(name));
    }

    @Override
    public short getShortProperty(String name) throws JMSException {
        return Values.toShort(getObjectProperty(name));
    }

    @Override
    public int getIntProperty(String name) throws JMSException {
        return Values.toInt(getObjectProperty(name));
    }

    @Override
    public long getLongProperty(String name) throws JMSException {
        return Values.toLong(getObjectProperty(name));
    }

    @Override
    public float getFloatProperty(String name) throws JMSException {
        return Values.toFloat(getObjectProperty(name));
    }

    @Override
    public double getDoubleProperty(String name) throws JMSException {
        return Values.toDouble(getObjectProperty(name));
    }

    @Override
    public String getStringProperty(String name) throws JMSException {
        return Values.toText(getObjectProperty(name));
    }

    @Override
    public Object getObjectProperty(String name) {
        if (DELIVERY_COUNT.equals(name) && deliveryCount > 0) {
            return deliveryCount;
        }
        return properties.get(name);
    }

    @Override
    public Enumeration<String> getPropertyNames() {
        java.util.List<String> names = new java.util.ArrayList<>(properties.keySet());
        if (deliveryCount > 0) {
            names.add(DELIVERY_COUNT);
        }
        return Collections.enumeration(names);
    }

    @Override
    public void setBooleanProperty(String name, boolean value) throws JMSException {
        setObjectProperty(name, value);
    }

    @Override
    public void setByteProperty(String name, byte value) throws JMSException {
        setObjectProperty(name, value);
    }

    @Override
    public void setShortProperty(String name, short value) throws JMSException {
        setObjectProperty(name, value);
    }

    @Override
    public void setIntProperty(String name, int value) throws JMSException {
        setObjectProperty(name, value);
    }

    @Override
    public void setLongProperty(String name, long value) throws JMSException {
        setObjectProperty(name, value);
    }

    @Override
    public void setFloatProperty(String name, float value) throws JMSException {
        setObjectProperty(name, value);
    }

    @Override
    public void setDoubleProperty(String name, double value) throws JMSException {
        setObjectProperty(name, value);
    }

    @Override
    public void setStringProperty(String name, String value) throws JMSException {
        setObjectProperty(name, value);
    }

    @Override
    public void setObjectProperty(String name, Object value) throws JMSException {
        if (propertiesReadOnly) {
            throw new MessageNotWriteableException("the properties of a received message are read-only; clearProperties() first");
        }
        if (name == null || name.isEmpty()) {
            throw new IllegalArgumentException("a property needs a name");
        }
        if (!(value instanceof Boolean || value instanceof Byte || value instanceof Short || value instanceof Integer || value instanceof Long
                || value instanceof Float || value instanceof Double || value instanceof String)) {
            throw new MessageFormatException("property '" + name + "': a " + (value == null ? "null" : value.getClass().getName())
                    + " is not a JMS property type");
        }
        properties.put(name, value);
    }

    @Override
    public void acknowledge() throws JMSException {
        acknowledger.acknowledge();
    }

    @Override
    public void clearBody() throws JMSException {
        bodyReadOnly = false;
    }

    @Override
    public <T> T getBody(Class<T> c) throws JMSException {
        return null;
    }

    @Override
    @SuppressWarnings("rawtypes")
    public boolean isBodyAssignableTo(Class c) {
        return true;
    }

    void checkWritable() throws MessageNotWriteableException {
        if (bodyReadOnly) {
            throw new MessageNotWriteableException("the body of a received message is read-only; clearBody() first");
        }
    }
}
