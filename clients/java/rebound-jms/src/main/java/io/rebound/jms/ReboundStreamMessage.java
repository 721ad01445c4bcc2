package io.rebound.jms;

import jakarta.jms.JMSException;
import jakarta.jms.MessageEOFException;
import jakarta.jms.MessageFormatException;
import jakarta.jms.MessageNotReadableException;
import jakarta.jms.StreamMessage;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/** A {@link StreamMessage}: the body is the values, each tagged with its type, read back with the JMS conversions. */
public final class ReboundStreamMessage extends ReboundMessage implements StreamMessage {
    private final List<Object> values = new ArrayList<>();
    private int next;
    /** How far into the current byte[] value {@link #readBytes} has read; -1 when not reading one. */
    private int bytesRead = -1;

    @Override
    String bodyType() {
        return "stream";
    }

    @Override
    byte[] encodeBody() throws JMSException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(values.size());
            for (Object v : values) {
                Values.write(out, v);
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
                values.add(Values.read(in));
            }
        } catch (IOException e) {
            throw new MessageFormatException("not a StreamMessage body: " + e.getMessage());
        }
    }

    @Override
    public void clearBody() throws JMSException {
        super.clearBody();
        values.clear();
        reset();
    }

    @Override
    public void reset() {
        bodyReadOnly = true;
        next = 0;
        bytesRead = -1;
    }

    @Override
    public <T> T getBody(Class<T> c) throws JMSException {
        throw new MessageFormatException("a StreamMessage body cannot be read with getBody");
    }

    @Override
    @SuppressWarnings("rawtypes")
    public boolean isBodyAssignableTo(Class c) {
        return false;
    }

    /** The next value, consumed only if {@code convert} accepts it (JMS: a failed conversion leaves the position). */
    private <T> T read(Converter<T> convert) throws JMSException {
        if (!bodyReadOnly) {
            throw new MessageNotReadableException("the message is being written; reset() it to read");
        }
        if (next >= values.size()) {
            throw new MessageEOFException("no more values in the stream");
        }
        T value = convert.convert(values.get(next));
        next++;
        return value;
    }

    @FunctionalInterface
    private interface Converter<T> {
        T convert(Object v) throws JMSException;
    }

    @Override
    public boolean readBoolean() throws JMSException {
        return read(Values::toBoolean);
    }

    @Override
    public byte readByte() throws JMSException {
        return read(Values::toByte);
    }

    @Override
    public short readShort() throws JMSException {
        return read(Values::toShort);
    }

    @Override
    public char readChar() throws JMSException {
        return read(Values::toChar);
    }

    @Override
    public int readInt() throws JMSException {
        return read(Values::toInt);
    }

    @Override
    public long readLong() throws JMSException {
        return read(Values::toLong);
    }

    @Override
    public float readFloat() throws JMSException {
        return read(Values::toFloat);
    }

    @Override
    public double readDouble() throws JMSException {
        return read(Values::toDouble);
    }

    @Override
    public String readString() throws JMSException {
        return read(Values::toText);
    }

    @Override
    public int readBytes(byte[] value) throws JMSException {
        if (!bodyReadOnly) {
            throw new MessageNotReadableException("the message is being written; reset() it to read");
        }
        if (next >= values.size()) {
            throw new MessageEOFException("no more values in the stream");
        }
        byte[] bytes = Values.toBytes(values.get(next));
        if (bytes == null) {
            next++;
            return -1;
        }
        int from = Math.max(bytesRead, 0);
        if (from >= bytes.length && bytesRead >= 0) {
            next++;
            bytesRead = -1;
            return -1;
        }
        int n = Math.min(value.length, bytes.length - from);
        System.arraycopy(bytes, from, value, 0, n);
        bytesRead = from + n;
        return n;
    }

    @Override
    public Object readObject() throws JMSException {
        return read(v -> v);
    }

    private void write(Object value) throws JMSException {
        checkWritable();
        values.add(Values.checked(value));
    }

    @Override
    public void writeBoolean(boolean value) throws JMSException {
        write(value);
    }

    @Override
    public void writeByte(byte value) throws JMSException {
        write(value);
    }

    @Override
    public void writeShort(short value) throws JMSException {
        write(value);
    }

    @Override
    public void writeChar(char value) throws JMSException {
        write(value);
    }

    @Override
    public void writeInt(int value) throws JMSException {
        write(value);
    }

    @Override
    public void writeLong(long value) throws JMSException {
        write(value);
    }

    @Override
    public void writeFloat(float value) throws JMSException {
        write(value);
    }

    @Override
    public void writeDouble(double value) throws JMSException {
        write(value);
    }

    @Override
    public void writeString(String value) throws JMSException {
        write(value);
    }

    @Override
    public void writeBytes(byte[] value) throws JMSException {
        write(value.clone());
    }

    @Override
    public void writeBytes(byte[] value, int offset, int length) throws JMSException {
        write(java.util.Arrays.copyOfRange(value, offset, offset + length));
    }

    @Override
    public void writeObject(Object value) throws JMSException {
        write(value);
    }
}
