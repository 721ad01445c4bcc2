package io.rebound.jms;

import jakarta.jms.JMSException;
import jakarta.jms.MapMessage;
import jakarta.jms.MessageFormatException;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.Map;

/** A {@link MapMessage}: the body is the entries, each name followed by its tagged value. */
public final class ReboundMapMessage extends ReboundMessage implements MapMessage {
    private final Map<String, Object> entries = new LinkedHashMap<>();

    @Override
    String bodyType() {
        return "map";
    }

    @Override
    byte[] encodeBody() throws JMSException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(entries.size());
            for (Map.Entry<String, Object> e : entries.entrySet()) {
                out.writeUTF(e.getKey());
                Values.write(out, e.getValue());
            }
        } catch (IOException e) {
            throw new MessageFormatException(e.getMessage());
        }
        return bytes.toByteArray();
    }

    @Override
    void decodeBody(byte[] body) throws JMSException {
        if (body.length == 0) {
            return;
        }
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(body))) {
            for (int n = in.readInt(); n > 0; n--) {
                entries.put(in.readUTF(), Values.read(in));
            }
        } catch (IOException e) {
            throw new MessageFormatException("not a MapMessage body: " + e.getMessage());
        }
    }

    @Override
    public void clearBody() throws JMSException {
        super.clearBody();
        entries.clear();
    }

    @Override
    public <T> T getBody(Class<T> c) throws JMSException {
        if (!isBodyAssignableTo(c)) {
            throw new MessageFormatException("a MapMessage body cannot be read as a " + c.getName());
        }
        return entries.isEmpty() ? null : c.cast(new LinkedHashMap<>(entries));
    }

    @Override
    @SuppressWarnings("rawtypes")
    public boolean isBodyAssignableTo(Class c) {
        return c.isAssignableFrom(Map.class);
    }

    @Override
    public boolean getBoolean(String name) throws JMSException {
        return Values.toBoolean(entries.get(name));
    }

    @Override
    public byte getByte(String name) throws JMSException {
        return Values.toByte(entries.get(name));
    }

    @Override
    public short getShort(String name) throws JMSException {
        return Values.toShort(entries.get(name));
    }

    @Override
    public char getChar(String name) throws JMSException {
        return Values.toChar(entries.get(name));
    }

    @Override
    public int getInt(String name) throws JMSException {
        return Values.toInt(entries.get(name));
    }

    @Override
    public long getLong(String name) throws JMSException {
        return Values.toLong(entries.get(name));
    }

    @Override
    public float getFloat(String name) throws JMSException {
        return Values.toFloat(entries.get(name));
    }

    @Override
    public double getDouble(String name) throws JMSException {
        return Values.toDouble(entries.get(name));
    }

    @Override
    public String getString(String name) throws JMSException {
        return Values.toText(entries.get(name));
    }

    @Override
    public byte[] getBytes(String name) throws JMSException {
        return Values.toBytes(entries.get(name));
    }

    @Override
    public Object getObject(String name) {
        return entries.get(name);
    }

    @Override
    public Enumeration<String> getMapNames() {
        return Collections.enumeration(entries.keySet());
    }

    @Override
    public void setBoolean(String name, boolean value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setByte(String name, byte value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setShort(String name, short value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setChar(String name, char value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setInt(String name, int value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setLong(String name, long value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setFloat(String name, float value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setDouble(String name, double value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setString(String name, String value) throws JMSException {
        setObject(name, value);
    }

    @Override
    public void setBytes(String name, byte[] value) throws JMSException {
        setObject(name, value == null ? null : value.clone());
    }

    @Override
    public void setBytes(String name, byte[] value, int offset, int length) throws JMSException {
        setObject(name, java.util.Arrays.copyOfRange(value, offset, offset + length));
    }

    @Override
    public void setObject(String name, Object value) throws JMSException {
        checkWritable();
        if (name == null || name.isEmpty()) {
            throw new IllegalArgumentException("a map entry needs a name");
        }
        entries.put(name, Values.checked(value));
    }

    @Override
    public boolean itemExists(String name) {
        return entries.containsKey(name);
    }
}
