package io.rebound.client;

import java.nio.file.Path;
import java.util.Optional;

/**
 * How to connect: TLS (PEM files) and a login. The CA certificate is required for an
 * {@code https://} URL (the system trust store is not used); a client certificate and its key,
 * for a broker with {@code require-client-cert}, go together.
 */
public final class ConnectOptions {
    private Path caCert;
    private Path clientCert;
    private Path clientKey;
    private String user;
    private String password;

    public static ConnectOptions defaults() {
        return new ConnectOptions();
    }

    /** The CA certificate(s) the broker's certificate must chain to. */
    public ConnectOptions caCert(Path caCert) {
        this.caCert = caCert;
        return this;
    }

    /** This client's certificate chain and its private key (mutual TLS). */
    public ConnectOptions clientCertificate(Path cert, Path key) {
        this.clientCert = cert;
        this.clientKey = key;
        return this;
    }

    /** Logs in as {@code user} with every call (HTTP basic credentials). */
    public ConnectOptions credentials(String user, String password) {
        if (user == null || user.isEmpty() || user.contains(":")) {
            throw new IllegalArgumentException("invalid user name '" + user + "': it must be non-empty and without ':'");
        }
        this.user = user;
        this.password = password == null ? "" : password;
        return this;
    }

    Optional<Path> caCert() {
        return Optional.ofNullable(caCert);
    }

    Optional<Path> clientCert() {
        return Optional.ofNullable(clientCert);
    }

    Optional<Path> clientKey() {
        return Optional.ofNullable(clientKey);
    }

    Optional<String> user() {
        return Optional.ofNullable(user);
    }

    String password() {
        return password;
    }
}
