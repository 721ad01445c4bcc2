package io.rebound.jms;

import jakarta.jms.BytesMessage;
import jakarta.jms.ConnectionMetaData;
import jakarta.jms.Destination;
import jakarta.jms.ExceptionListener;
import jakarta.jms.IllegalStateRuntimeException;
import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSProducer;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.ObjectMessage;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;
import jakarta.jms.Session;
import jakarta.jms.StreamMessage;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.TemporaryTopic;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import java.io.Serializable;

/** The simplified API: a connection and one session. Contexts made from it share its connection, which the first one closes. */
final class ReboundJMSContext implements JMSContext {
    private final ReboundConnection connection;
    private final int sessionMode;
    private final boolean ownsConnection;
    private Session session;
    private boolean autoStart = true;

    ReboundJMSContext(ReboundConnection connection, int sessionMode, boolean ownsConnection) {
        this.connection = connection;
        this.sessionMode = sessionMode;
        this.ownsConnection = ownsConnection;
    }

    private synchronized Session session() {
        if (session == null) {
            session = Jms.unchecked(() -> connection.createSession(sessionMode));
        }
        return session;
    }

    private JMSConsumer started(Jms.Call<jakarta.jms.MessageConsumer> create) {
        JMSConsumer consumer = new ReboundJMSConsumer(Jms.unchecked(create));
        if (autoStart) {
            start();
        }
        return consumer;
    }

    @Override
    public JMSContext createContext(int mode) {
        if (!ownsConnection) {
            throw new IllegalStateRuntimeException("createContext on a context that was itself made by createContext");
        }
        return new ReboundJMSContext(connection, mode, false);
    }

    @Override
    public JMSProducer createProducer() {
        return new ReboundJMSProducer(this, Jms.unchecked(() -> session().createProducer(null)));
    }

    @Override
    public String getClientID() {
        return connection.getClientID();
    }

    @Override
    public void setClientID(String clientID) {
        Jms.uncheckedRun(() -> connection.setClientID(clientID));
    }

    @Override
    public ConnectionMetaData getMetaData() {
        return connection.getMetaData();
    }

    @Override
    public ExceptionListener getExceptionListener() {
        return connection.getExceptionListener();
    }

    @Override
    public void setExceptionListener(ExceptionListener listener) {
        connection.setExceptionListener(listener);
    }

    @Override
    public void start() {
        Jms.uncheckedRun(connection::start);
    }

    @Override
    public void stop() {
        Jms.uncheckedRun(connection::stop);
    }

    @Override
    public void setAutoStart(boolean autoStart) {
        this.autoStart = autoStart;
    }

    @Override
    public boolean getAutoStart() {
        return autoStart;
    }

    @Override
    public void close() {
        Jms.uncheckedRun(() -> {
            synchronized (this) {
                if (session != null) {
                    session.close();
                }
            }
            if (ownsConnection) {
                connection.close();
            }
        });
    }

    @Override
    public BytesMessage createBytesMessage() {
        return Jms.unchecked(() -> session().createBytesMessage());
    }

    @Override
    public MapMessage createMapMessage() {
        return Jms.unchecked(() -> session().createMapMessage());
    }

    @Override
    public Message createMessage() {
        return Jms.unchecked(() -> session().createMessage());
    }

    @Override
    public ObjectMessage createObjectMessage() {
        return Jms.unchecked(() -> session().createObjectMessage());
    }

    @Override
    public ObjectMessage createObjectMessage(Serializable object) {
        return Jms.unchecked(() -> session().createObjectMessage(object));
    }

    @Override
    public StreamMessage createStreamMessage() {
        return Jms.unchecked(() -> session().createStreamMessage());
    }

    @Override
    public TextMessage createTextMessage() {
        return Jms.unchecked(() -> session().createTextMessage());
    }

    @Override
    public TextMessage createTextMessage(String text) {
        return Jms.unchecked(() -> session().createTextMessage(text));
    }

    @Override
    public boolean getTransacted() {
        return sessionMode == Session.SESSION_TRANSACTED;
    }

    @Override
    public int getSessionMode() {
        return sessionMode;
    }

    @Override
    public void commit() {
        Jms.uncheckedRun(() -> session().commit());
    }

    @Override
    public void rollback() {
        Jms.uncheckedRun(() -> session().rollback());
    }

    @Override
    public void recover() {
        Jms.uncheckedRun(() -> session().recover());
    }

    @Override
    public JMSConsumer createConsumer(Destination destination) {
        return started(() -> session().createConsumer(destination));
    }

    @Override
    public JMSConsumer createConsumer(Destination destination, String messageSelector) {
        return started(() -> session().createConsumer(destination, messageSelector));
    }

    @Override
    public JMSConsumer createConsumer(Destination destination, String messageSelector, boolean noLocal) {
        return started(() -> session().createConsumer(destination, messageSelector, noLocal));
    }

    @Override
    public Queue createQueue(String queueName) {
        return Jms.unchecked(() -> session().createQueue(queueName));
    }

    @Override
    public Topic createTopic(String topicName) {
        return Jms.unchecked(() -> session().createTopic(topicName));
    }

    @Override
    public JMSConsumer createDurableConsumer(Topic topic, String name) {
        return started(() -> session().createDurableConsumer(topic, name));
    }

    @Override
    public JMSConsumer createDurableConsumer(Topic topic, String name, String messageSelector, boolean noLocal) {
        return started(() -> session().createDurableConsumer(topic, name, messageSelector, noLocal));
    }

    @Override
    public JMSConsumer createSharedDurableConsumer(Topic topic, String name) {
        return started(() -> session().createSharedDurableConsumer(topic, name));
    }

    @Override
    public JMSConsumer createSharedDurableConsumer(Topic topic, String name, String messageSelector) {
        return started(() -> session().createSharedDurableConsumer(topic, name, messageSelector));
    }

    @Override
    public JMSConsumer createSharedConsumer(Topic topic, String sharedSubscriptionName) {
        return started(() -> session().createSharedConsumer(topic, sharedSubscriptionName));
    }

    @Override
    public JMSConsumer createSharedConsumer(Topic topic, String sharedSubscriptionName, String messageSelector) {
        return started(() -> session().createSharedConsumer(topic, sharedSubscriptionName, messageSelector));
    }

    @Override
    public QueueBrowser createBrowser(Queue queue) {
        return Jms.unchecked(() -> session().createBrowser(queue));
    }

    @Override
    public QueueBrowser createBrowser(Queue queue, String messageSelector) {
        return Jms.unchecked(() -> session().createBrowser(queue, messageSelector));
    }

    @Override
    public TemporaryQueue createTemporaryQueue() {
        return Jms.unchecked(() -> session().createTemporaryQueue());
    }

    @Override
    public TemporaryTopic createTemporaryTopic() {
        return Jms.unchecked(() -> session().createTemporaryTopic());
    }

    @Override
    public void unsubscribe(String name) {
        Jms.uncheckedRun(() -> session().unsubscribe(name));
    }

    @Override
    public void acknowledge() {
        Jms.uncheckedRun(() -> ((ReboundSession) session()).acknowledgeAll());
    }
}
