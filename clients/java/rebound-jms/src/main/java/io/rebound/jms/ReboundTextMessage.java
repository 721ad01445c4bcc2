package io.rebound.jms;

import jakarta.jms.JMSException;
import jakarta.jms.MessageFormatException;
import jakarta.jms.TextMessage;
import java.nio.charset.StandardCharsets;

/** A {@link TextMessage}: the body is the text in UTF-8. */
public final class ReboundTextMessage extends ReboundMessage implements TextMessage {
    private String text;

    @Override
    String bodyType() {
        return "text";
    }

    @Override
    byte[] encodeBody() {
        return text == null ? new byte[0] : text.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    void decodeBody(byte[] body) {
        text = new String(body, StandardCharsets.UTF_8);
    }

    @Override
    public void setText(String text) throws JMSException {
        checkWritable();
        this.text = text;
    }

    @Override
    public String getText() {
        return text;
    }

    @Override
    public void clearBody() throws JMSException {
        super.clearBody();
        text = null;
    }

    @Override
    public <T> T getBody(Class<T> c) throws JMSException {
        if (!isBodyAssignableTo(c)) {
            throw new MessageFormatException("a TextMessage body cannot be read as a " + c.getName());
        }
        return c.cast(text);
    }

    @Override
    @SuppressWarnings("rawtypes")
    public boolean isBodyAssignableTo(Class c) {
        return text == null || c.isAssignableFrom(String.class);
    }
}
