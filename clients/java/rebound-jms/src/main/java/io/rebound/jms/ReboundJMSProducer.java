package io.rebound.jms;

import jakarta.jms.BytesMessage;
import jakarta.jms.CompletionListener;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.JMSProducer;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageProducer;
import java.io.Serializable;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/** The simplified API's producer: its settings and properties apply to every message it sends. */
final class ReboundJMSProducer implements JMSProducer {
    private final ReboundJMSContext context;
    private final MessageProducer producer;
    private final Map<String, Object> properties = new LinkedHashMap<>();
    private CompletionListener async;
    private String correlationId;
    private String type;
    private Destination replyTo;

    ReboundJMSProducer(ReboundJMSContext context, MessageProducer producer) {
        this.context = context;
        this.producer = producer;
    }

    @Override
    public JMSProducer send(Destination destination, Message message) {
        Jms.uncheckedRun(() -> {
            for (Map.Entry<String, Object> e : properties.entrySet()) {
                message.setObjectProperty(e.getKey(), e.getValue());
            }
            if (correlationId != null) {
                message.setJMSCorrelationID(correlationId);
            }
            if (type != null) {
                message.setJMSType(type);
            }
            if (replyTo != null) {
                message.setJMSReplyTo(replyTo);
            }
            if (async == null) {
                producer.send(destination, message);
            } else {
                producer.send(destination, message, async);
            }
        });
        return this;
    }

    @Override
    public JMSProducer send(Destination destination, String body) {
        return send(destination, context.createTextMessage(body));
    }

    @Override
    public JMSProducer send(Destination destination, Map<String, Object> body) {
        MapMessage message = context.createMapMessage();
        Jms.uncheckedRun(() -> {
            for (Map.Entry<String, Object> e : body.entrySet()) {
                message.setObject(e.getKey(), e.getValue());
            }
        });
        return send(destination, message);
    }

    @Override
    public JMSProducer send(Destination destination, byte[] body) {
        BytesMessage message = context.createBytesMessage();
        Jms.uncheckedRun(() -> message.writeBytes(body));
        return send(destination, message);
    }

    @Override
    public JMSProducer send(Destination destination, Serializable body) {
        throw Jms.unchecked(Jms.unsupported("ObjectMessage (Java deserialization of message bodies is a known remote-code-execution hazard)"));
    }

    @Override
    public JMSProducer setDisableMessageID(boolean value) {
        Jms.uncheckedRun(() -> producer.setDisableMessageID(value));
        return this;
    }

    @Override
    public boolean getDisableMessageID() {
        return Jms.unchecked(producer::getDisableMessageID);
    }

    @Override
    public JMSProducer setDisableMessageTimestamp(boolean value) {
        Jms.uncheckedRun(() -> producer.setDisableMessageTimestamp(value));
        return this;
    }

    @Override
    public boolean getDisableMessageTimestamp() {
        return Jms.unchecked(producer::getDisableMessageTimestamp);
    }

    @Override
    public JMSProducer setDeliveryMode(int deliveryMode) {
        Jms.uncheckedRun(() -> producer.setDeliveryMode(deliveryMode));
        return this;
    }

    @Override
    public int getDeliveryMode() {
        return Jms.unchecked(producer::getDeliveryMode);
    }

    @Override
    public JMSProducer setPriority(int priority) {
        Jms.uncheckedRun(() -> producer.setPriority(priority));
        return this;
    }

    @Override
    public int getPriority() {
        return Jms.unchecked(producer::getPriority);
    }

    @Override
    public JMSProducer setTimeToLive(long timeToLive) {
        Jms.uncheckedRun(() -> producer.setTimeToLive(timeToLive));
        return this;
    }

    @Override
    public long getTimeToLive() {
        return Jms.unchecked(producer::getTimeToLive);
    }

    @Override
    public JMSProducer setDeliveryDelay(long deliveryDelay) {
        Jms.uncheckedRun(() -> producer.setDeliveryDelay(deliveryDelay));
        return this;
    }

    @Override
    public long getDeliveryDelay() {
        return Jms.unchecked(producer::getDeliveryDelay);
    }

    @Override
    public JMSProducer setAsync(CompletionListener completionListener) {
        this.async = completionListener;
        return this;
    }

    @Override
    public CompletionListener getAsync() {
        return async;
    }

    private JMSProducer property(String name, Object value) {
        if (name == null || name.isEmpty()) {
            throw new IllegalArgumentException("a property needs a name");
        }
        properties.put(name, value);
        return this;
    }

    @Override
    public JMSProducer setProperty(String name, boolean value) {
        return property(name, value);
    }

    @Override
    public JMSProducer setProperty(String name, byte value) {
        return property(name, value);
    }

    @Override
    public JMSProducer setProperty(String name, short value) {
        return property(name, value);
    }

    @Override
    public JMSProducer setProperty(String name, int value) {
        return property(name, value);
    }

    @Override
    public JMSProducer setProperty(String name, long value) {
        return property(name, value);
    }

    @Override
    public JMSProducer setProperty(String name, float value) {
        return property(name, value);
    }

    @Override
    public JMSProducer setProperty(String name, double value) {
        return property(name, value);
    }

    @Override
    public JMSProducer setProperty(String name, String value) {
        return property(name, value);
    }

    @Override
    public JMSProducer setProperty(String name, Object value) {
        return property(name, value);
    }

    @Override
    public JMSProducer clearProperties() {
        properties.clear();
        return this;
    }

    @Override
    public boolean propertyExists(String name) {
        return properties.containsKey(name);
    }

    @Override
    public boolean getBooleanProperty(String name) {
        return Jms.unchecked(() -> Values.toBoolean(properties.get(name)));
    }

    @Override
    public byte getByteProperty(String name) {
        return Jms.unchecked(() -> Values.toByte(properties.get(name)));
    }

    @Override
    public short getShortProperty(String name) {
        return Jms.unchecked(() -> Values.toShort(properties.get(name)));
    }

    @Override
    public int getIntProperty(String name) {
        return Jms.unchecked(() -> Values.toInt(properties.get(name)));
    }

    @Override
    public long getLongProperty(String name) {
        return Jms.unchecked(() -> Values.toLong(properties.get(name)));
    }

    @Override
    public float getFloatProperty(String name) {
        return Jms.unchecked(() -> Values.toFloat(properties.get(name)));
    }

    @Override
    public double getDoubleProperty(String name) {
        return Jms.unchecked(() -> Values.toDouble(properties.get(name)));
    }

    @Override
    public String getStringProperty(String name) {
        return Jms.unchecked(() -> Values.toText(properties.get(name)));
    }

    @Override
    public Object getObjectProperty(String name) {
        return properties.get(name);
    }

    @Override
    public Set<String> getPropertyNames() {
        return Collections.unmodifiableSet(properties.keySet());
    }

    @Override
    public JMSProducer setJMSCorrelationIDAsBytes(byte[] correlationID) {
        this.correlationId = new String(correlationID, java.nio.charset.StandardCharsets.UTF_8);
        return this;
    }

    @Override
    public byte[] getJMSCorrelationIDAsBytes() {
        return correlationId == null ? null : correlationId.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    @Override
    public JMSProducer setJMSCorrelationID(String correlationID) {
        this.correlationId = correlationID;
        return this;
    }

    @Override
    public String getJMSCorrelationID() {
        return correlationId;
    }

    @Override
    public JMSProducer setJMSType(String type) {
        this.type = type;
        return this;
    }

    @Override
    public String getJMSType() {
        return type;
    }

    @Override
    public JMSProducer setJMSReplyTo(Destination replyTo) {
        this.replyTo = replyTo;
        return this;
    }

    @Override
    public Destination getJMSReplyTo() {
        return replyTo;
    }
}
