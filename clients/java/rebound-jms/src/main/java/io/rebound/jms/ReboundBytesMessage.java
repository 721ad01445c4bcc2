package io.rebound.jms;

import jakarta.jms.BytesMessage;
import jakarta.jms.JMSException;
import jakarta.jms.MessageEOFException;
import jakarta.jms.MessageFormatException;
import jakarta.jms.MessageNotReadableException;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;

/** A {@link BytesMessage}: the body is the bytes written, in {@link DataOutputStream}'s encoding. Also what a non-JMS sender's message arrives as. */
public final class ReboundBytesMessage extends ReboundMessage implements BytesMessage {
    private ByteArrayOutputStream written = new ByteArrayOutputStream();
    private DataOutputStream out = new DataOutputStream(written);
    private byte[] body;
    private DataInputStream in;

    @Override
    String bodyType() {
        return "bytes";
    }

    @Override
    byte[] encodeBody() {
        return bodyReadOnly ? body.clone() : written.toByteArray();
    }

    @Override
    void decodeBody(byte[] bytes) {
        body = bytes;
        in = new DataInputStream(new ByteArrayInputStream(body));
    }

    @Override
    public long getBodyLength() throws JMSException {
        readable();
        return body.length;
    }

    @Override
    public void reset() {
        if (!bodyReadOnly) {
            decodeBody(written.toByteArray());
            bodyReadOnly = true;
        } else {
            decodeBody(body);
        }
    }

    @Override
    public void clearBody() throws JMSException {
        super.clearBody();
        written = new ByteArrayOutputStream();
        out = new DataOutputStream(written);
        body = null;
        in = null;
    }

    @Override
    public <T> T getBody(Class<T> c) throws JMSException {
        if (!isBodyAssignableTo(c)) {
            throw new MessageFormatException("a BytesMessage body cannot be read as a " + c.getName());
        }
        byte[] bytes = encodeBody();
        return bytes.length == 0 ? null : c.cast(bytes);
    }

    @Override
    @SuppressWarnings("rawtypes")
    public boolean isBodyAssignableTo(Class c) {
        return c.isAssignableFrom(byte[].class);
    }

    private void readable() throws MessageNotReadableException {
        if (!bodyReadOnly) {
            throw new MessageNotReadableException("the message is being written; reset() it to read");
        }
    }

    private <T> T read(IoRead<T> read) throws JMSException {
        readable();
        try {
            return read.read(in);
        } catch (EOFException e) {
            throw new MessageEOFException("the end of the body was reached");
        } catch (IOException e) {
            throw new MessageFormatException(e.getMessage());
        }
    }

    private void write(IoWrite write) throws JMSException {
        checkWritable();
        try {
            write.write(out);
        } catch (IOException e) {
            throw new MessageFormatException(e.getMessage());
        }
    }

    @FunctionalInterface
    private interface IoRead<T> {
        T read(DataInputStream in) throws IOException;
    }

    @FunctionalInterface
    private interface IoWrite {
        void write(DataOutputStream out) throws IOException;
    }

    @Override
    public boolean readBoolean() throws JMSException {
        return read(DataInputStream::readBoolean);
    }

    @Override
    public byte readByte() throws JMSException {
        return read(DataInputStream::readByte);
    }

    @Override
    public int readUnsignedByte() throws JMSException {
        return read(DataInputStream::readUnsignedByte);
    }

    @Override
    public short readShort() throws JMSException {
        return read(DataInputStream::readShort);
    }

    @Override
    public int readUnsignedShort() throws JMSException {
        return read(DataInputStream::readUnsignedShort);
    }

    @Override
    public char readChar() throws JMSException {
        return read(DataInputStream::readChar);
    }

    @Override
    public int readInt() throws JMSException {
        return read(DataInputStream::readInt);
    }

    @Override
    public long readLong() throws JMSException {
        return read(DataInputStream::readLong);
    }

    @Override
    public float readFloat() throws JMSException {
        return read(DataInputStream::readFloat);
    }

    @Override
    public double readDouble() throws JMSException {
        return read(DataInputStream::readDouble);
    }

    @Override
    public String readUTF() throws JMSException {
        return read(in -> in.readUTF());
    }

    @Override
    public int readBytes(byte[] value) throws JMSException {
        return readBytes(value, value.length);
    }

    @Override
    public int readBytes(byte[] value, int length) throws JMSException {
        return read(in -> in.read(value, 0, length));
    }

    @Override
    public void writeBoolean(boolean value) throws JMSException {
        write(o -> o.writeBoolean(value));
    }

    @Override
    public void writeByte(byte value) throws JMSException {
        write(o -> o.writeByte(value));
    }

    @Override
    public void writeShort(short value) throws JMSException {
        write(o -> o.writeShort(value));
    }

    @Override
    public void writeChar(char value) throws JMSException {
        write(o -> o.writeChar(value));
    }

    @Override
    public void writeInt(int value) throws JMSException {
        write(o -> o.writeInt(value));
    }

    @Override
    public void writeLong(long value) throws JMSException {
        write(o -> o.writeLong(value));
    }

    @Override
    public void writeFloat(float value) throws JMSException {
        write(o -> o.writeFloat(value));
    }

    @Override
    public void writeDouble(double value) throws JMSException {
        write(o -> o.writeDouble(value));
    }

    @Override
    public void writeUTF(String value) throws JMSException {
        write(o -> o.writeUTF(value));
    }

    @Override
    public void writeBytes(byte[] value) throws JMSException {
        write(o -> o.write(value));
    }

    @Override
    public void writeBytes(byte[] value, int offset, int length) throws JMSException {
        write(o -> o.write(value, offset, length));
    }

    @Override
    public void writeObject(Object value) throws JMSException {
        Object v = Values.checked(value);
        if (v == null) {
            throw new NullPointerException("writeObject(null)");
        } else if (v instanceof Boolean b) {
            writeBoolean(b);
        } else if (v instanceof Byte b) {
            writeByte(b);
        } else if (v instanceof Short sh) {
            writeShort(sh);
        } else if (v instanceof Character c) {
            writeChar(c);
        } else if (v instanceof Integer i) {
            writeInt(i);
        } else if (v instanceof Long l) {
            writeLong(l);
        } else if (v instanceof Float f) {
            writeFloat(f);
        } else if (v instanceof Double d) {
            writeDouble(d);
        } else if (v instanceof String str) {
            writeUTF(str);
        } else {
            writeBytes((byte[]) v);
        }
    }
}
