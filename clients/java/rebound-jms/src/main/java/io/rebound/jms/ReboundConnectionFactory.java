package io.rebound.jms;

import io.rebound.client.ConnectOptions;
import io.rebound.client.ReboundClient;
import io.rebound.client.ReboundException;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSException;
import java.nio.file.Path;

/**
 * The entry point of the JMS provider: {@code new ReboundConnectionFactory("http://127.0.0.1:61616")}
 * where an Artemis application had an {@code ActiveMQConnectionFactory}. An {@code https://} URL
 * needs {@link #setCaCert}; a broker with users needs {@link #setUser} and {@link #setPassword}
 * (or the user and password given to {@code createConnection}), or a client certificate.
 */
public final class ReboundConnectionFactory implements ConnectionFactory {
    private final String url;
    private String user;
    private String password;
    private Path caCert;
    private Path clientCert;
    private Path clientKey;
    private int prefetch = DEFAULT_PREFETCH;

    /** Messages a consumer keeps ahead of the application unless {@link #setPrefetch} says otherwise. */
    public static final int DEFAULT_PREFETCH = 100;

    public ReboundConnectionFactory(String url) {
        this.url = url;
    }

    public ReboundConnectionFactory() {
        this(ReboundClient.DEFAULT_URL);
    }

    public void setUser(String user) {
        this.user = user;
    }

    public void setPassword(String password) {
        this.password = password;
    }

    /** The PEM CA certificate(s) the broker's certificate must chain to, for an {@code https://} URL. */
    public void setCaCert(Path caCert) {
        this.caCert = caCert;
    }

    /** A PEM client certificate and key, for a broker that requires one (its CN may name the user). */
    public void setClientCertificate(Path cert, Path key) {
        this.clientCert = cert;
        this.clientKey = key;
    }

    /**
     * How many messages each consumer keeps ahead of the application (its credit, as Artemis's
     * {@code consumerWindowSize} but counted in messages): more keeps a fast consumer busy across
     * round trips; fewer leaves more of a queue to its other consumers and bounds the memory a
     * consumer holds at this many messages.
     */
    public void setPrefetch(int messages) {
        if (messages < 1) {
            throw new IllegalArgumentException("prefetch must be at least 1 message, not " + messages);
        }
        this.prefetch = messages;
    }

    public String getUrl() {
        return url;
    }

    @Override
    public Connection createConnection() throws JMSException {
        return createConnection(user, password);
    }

    @Override
    public Connection createConnection(String userName, String pass) throws JMSException {
        ConnectOptions options = ConnectOptions.defaults();
        try {
            if (caCert != null) {
                options.caCert(caCert);
            }
            if (clientCert != null) {
                options.clientCertificate(clientCert, clientKey);
            }
            if (userName != null) {
                options.credentials(userName, pass);
            }
            return new ReboundConnection(ReboundClient.connect(url, options), prefetch);
        } catch (IllegalArgumentException e) {
            // A setting that cannot be used (a URL, a TLS file, a user name): the message says which.
            JMSException jms = new JMSException(e.getMessage());
            jms.initCause(e);
            throw jms;
        } catch (ReboundException e) {
            throw Jms.wrap(e);
        }
    }

    @Override
    public JMSContext createContext() {
        return createContext(user, password, JMSContext.AUTO_ACKNOWLEDGE);
    }

    @Override
    public JMSContext createContext(String userName, String pass) {
        return createContext(userName, pass, JMSContext.AUTO_ACKNOWLEDGE);
    }

    @Override
    public JMSContext createContext(String userName, String pass, int sessionMode) {
        ReboundConnection connection = (ReboundConnection) Jms.unchecked(() -> createConnection(userName, pass));
        return new ReboundJMSContext(connection, sessionMode, true);
    }

    @Override
    public JMSContext createContext(int sessionMode) {
        return createContext(user, password, sessionMode);
    }
}
