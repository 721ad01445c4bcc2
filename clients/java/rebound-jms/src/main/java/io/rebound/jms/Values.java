package io.rebound.jms;

import jakarta.jms.MessageFormatException;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * The JMS conversions between typed values (properties, map and stream entries; JMS 3.1 §3.5.4)
 * and the tagged binary form of {@code MapMessage} and {@code StreamMessage} bodies. Integer
 * properties travel as 64-bit integers and come back as {@code Long}: the narrower getters accept
 * them when they fit.
 */
final class Values {
    private Values() {}

    static boolean toBoolean(Object v) throws MessageFormatException {
        if (v instanceof Boolean b) {
            return b;
        }
        if (v instanceof String || v == null) {
            return Boolean.parseBoolean((String) v);
        }
        throw cannot(v, "boolean");
    }

    static long toLong(Object v, long min, long max, String type) throws MessageFormatException {
        long value;
        if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
            value = ((Number) v).longValue();
        } else if (v instanceof String || v == null) {
            value = Long.parseLong((String) v);
        } else {
            throw cannot(v, type);
        }
        if (value < min || value > max) {
            throw new MessageFormatException(value + " does not fit in a " + type);
        }
        return value;
    }

    static byte toByte(Object v) throws MessageFormatException {
        return (byte) toLong(v, Byte.MIN_VALUE, Byte.MAX_VALUE, "byte");
    }

    static short toShort(Object v) throws MessageFormatException {
        return (short) toLong(v, Short.MIN_VALUE, Short.MAX_VALUE, "short");
    }

    static int toInt(Object v) throws MessageFormatException {
        return (int) toLong(v, Integer.MIN_VALUE, Integer.MAX_VALUE, "int");
    }

    static long toLong(Object v) throws MessageFormatException {
        return toLong(v, Long.MIN_VALUE, Long.MAX_VALUE, "long");
    }

    static double toDouble(Object v) throws MessageFormatException {
        if (v instanceof Float || v instanceof Double) {
            return ((Number) v).doubleValue();
        }
        if (v instanceof String || v == null) {
            return Double.parseDouble((String) v);
        }
        throw cannot(v, "double");
    }

    static float toFloat(Object v) throws MessageFormatException {
        if (v instanceof Double d) {
            return d.floatValue();
        }
        if (v instanceof Float f) {
            return f;
        }
        if (v instanceof String || v == null) {
            return Float.parseFloat((String) v);
        }
        throw cannot(v, "float");
    }

    static char toChar(Object v) throws MessageFormatException {
        if (v instanceof Character c) {
            return c;
        }
        if (v == null) {
            throw new NullPointerException("no value to read as a char");
        }
        throw cannot(v, "char");
    }

    static String toText(Object v) throws MessageFormatException {
        if (v instanceof byte[]) {
            throw cannot(v, "String");
        }
        return v == null ? null : v.toString();
    }

    static byte[] toBytes(Object v) throws MessageFormatException {
        if (v == null || v instanceof byte[]) {
            return (byte[]) v;
        }
        throw cannot(v, "byte[]");
    }

    /** The types a map or stream entry may hold. */
    static Object checked(Object v) throws MessageFormatException {
        if (v == null || v instanceof Boolean || v instanceof Byte || v instanceof Short || v instanceof Character || v instanceof Integer
                || v instanceof Long || v instanceof Float || v instanceof Double || v instanceof String || v instanceof byte[]) {
            return v;
        }
        throw new MessageFormatException("a " + v.getClass().getName() + " cannot be a JMS value");
    }

    private static MessageFormatException cannot(Object v, String type) {
        return new MessageFormatException("a " + v.getClass().getSimpleName() + " value cannot be read as a " + type);
    }

    static void write(DataOutputStream out, Object v) throws IOException {
        if (v == null) {
            out.writeByte(0);
        } else if (v instanceof Boolean b) {
            out.writeByte(1);
            out.writeBoolean(b);
        } else if (v instanceof Byte b) {
            out.writeByte(2);
            out.writeByte(b);
        } else if (v instanceof Short s) {
            out.writeByte(3);
            out.writeShort(s);
        } else if (v instanceof Character c) {
            out.writeByte(4);
            out.writeChar(c);
        } else if (v instanceof Integer i) {
            out.writeByte(5);
            out.writeInt(i);
        } else if (v instanceof Long l) {
            out.writeByte(6);
            out.writeLong(l);
        } else if (v instanceof Float f) {
            out.writeByte(7);
            out.writeFloat(f);
        } else if (v instanceof Double d) {
            out.writeByte(8);
            out.writeDouble(d);
        } else if (v instanceof String s) {
            out.writeByte(9);
            writeBytes(out, s.getBytes(StandardCharsets.UTF_8));
        } else {
            out.writeByte(10);
            writeBytes(out, (byte[]) v);
        }
    }

    static Object read(DataInputStream in) throws IOException {
        int tag = in.readByte();
        return switch (tag) {
            case 0 -> null;
            case 1 -> in.readBoolean();
            case 2 -> in.readByte();
            case 3 -> in.readShort();
            case 4 -> in.readChar();
            case 5 -> in.readInt();
            case 6 -> in.readLong();
            case 7 -> in.readFloat();
            case 8 -> in.readDouble();
            case 9 -> new String(readBytes(in), StandardCharsets.UTF_8);
            case 10 -> readBytes(in);
            default -> throw new IOException("unknown value tag " + tag + ": the body was not written by rebound's JMS provider");
        };
    }

    private static void writeBytes(DataOutputStream out, byte[] bytes) throws IOException {
        out.writeInt(bytes.length);
        out.write(bytes);
    }

    private static byte[] readBytes(DataInputStream in) throws IOException {
        byte[] bytes = new byte[in.readInt()];
        in.readFully(bytes);
        return bytes;
    }
}
