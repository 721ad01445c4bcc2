package io.rebound.client;

import com.google.protobuf.ByteString;
import java.util.LinkedHashMap;
import java.util.Map;
import rebound.v1.MessagingOuterClass.PropertyValue;

/** Conversions between Java property values and the protocol's typed {@code PropertyValue}. */
final class Properties {
    private Properties() {}

    static PropertyValue encode(String name, Object value) {
        PropertyValue.Builder b = PropertyValue.newBuilder();
        if (value instanceof String s) {
            b.setString(s);
        } else if (value instanceof Long || value instanceof Integer || value instanceof Short || value instanceof Byte) {
            b.setInt(((Number) value).longValue());
        } else if (value instanceof Double || value instanceof Float) {
            b.setDouble(((Number) value).doubleValue());
        } else if (value instanceof Boolean bool) {
            b.setBool(bool);
        } else if (value instanceof byte[] bytes) {
            b.setBytes(ByteString.copyFrom(bytes));
        } else {
            throw new IllegalArgumentException("property '" + name + "': a " + (value == null ? "null" : value.getClass().getName())
                    + " cannot be sent; use a String, an integer, a floating-point number, a Boolean or a byte[]");
        }
        return b.build();
    }

    static Object decode(PropertyValue value) {
        return switch (value.getValueCase()) {
            case STRING -> value.getString();
            case INT -> value.getInt();
            case DOUBLE -> value.getDouble();
            case BOOL -> value.getBool();
            case BYTES -> value.getBytes().toByteArray();
            case VALUE_NOT_SET -> null;
        };
    }

    static Map<String, Object> decode(Map<String, PropertyValue> properties) {
        Map<String, Object> decoded = new LinkedHashMap<>();
        properties.forEach((name, value) -> decoded.put(name, decode(value)));
        return decoded;
    }
}
