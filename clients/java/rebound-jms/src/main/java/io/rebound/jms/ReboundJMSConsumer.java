package io.rebound.jms;

import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageListener;

/** The simplified API's consumer, over a {@link MessageConsumer}. */
final class ReboundJMSConsumer implements JMSConsumer {
    private final MessageConsumer consumer;

    ReboundJMSConsumer(MessageConsumer consumer) {
        this.consumer = consumer;
    }

    @Override
    public String getMessageSelector() {
        return Jms.unchecked(consumer::getMessageSelector);
    }

    @Override
    public MessageListener getMessageListener() {
        return Jms.unchecked(consumer::getMessageListener);
    }

    @Override
    public void setMessageListener(MessageListener listener) {
        Jms.uncheckedRun(() -> consumer.setMessageListener(listener));
    }

    @Override
    public Message receive() {
        return Jms.unchecked(consumer::receive);
    }

    @Override
    public Message receive(long timeout) {
        return Jms.unchecked(() -> consumer.receive(timeout));
    }

    @Override
    public Message receiveNoWait() {
        return Jms.unchecked(consumer::receiveNoWait);
    }

    @Override
    public void close() {
        Jms.uncheckedRun(consumer::close);
    }

    @Override
    public <T> T receiveBody(Class<T> c) {
        return body(receive(), c);
    }

    @Override
    public <T> T receiveBody(Class<T> c, long timeout) {
        return body(receive(timeout), c);
    }

    @Override
    public <T> T receiveBodyNoWait(Class<T> c) {
        return body(receiveNoWait(), c);
    }

    private static <T> T body(Message message, Class<T> c) {
        return message == null ? null : Jms.unchecked(() -> message.getBody(c));
    }
}
