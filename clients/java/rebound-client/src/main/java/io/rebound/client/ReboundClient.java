package io.rebound.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ConnectivityState;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import rebound.v1.MessagingGrpc;
import rebound.v1.MessagingOuterClass.SendRequest;

/**
 * A connection to a rebound broker: one HTTP/2 connection shared by every call, publisher,
 * consumer and session made from it, which reconnects by itself when it drops. Thread-safe; a
 * program needs one. Close it when done.
 *
 * <pre>{@code
 * try (ReboundClient client = ReboundClient.connect("http://127.0.0.1:61616")) {
 *     long id = client.send(new OutgoingMessage("orders", "hello"));
 *     try (Consumer consumer = client.consumer("orders").window(10).open()) {
 *         Delivery d = consumer.next(Duration.ofSeconds(1));
 *         consumer.ack(d.id());
 *     }
 * }
 * }</pre>
 */
public final class ReboundClient implements AutoCloseable {
    /** The broker's documented default listen address. */
    public static final String DEFAULT_URL = "http://127.0.0.1:61616";
    /** Far above any sensible broker limit, so that the broker's own max-message-size check, which names the limit, refuses an oversized message. */
    private static final int MAX_GRPC_MESSAGE = 64 * 1024 * 1024;
    private static final long CONNECT_TIMEOUT_MS = 5_000;

    private final String url;
    private final ManagedChannel channel;
    private final Channel authorized;
    private final MessagingGrpc.MessagingBlockingStub messaging;
    private final Admin admin;
    /**
     * Runs publishers' completions (one task per answered frame, in order), so that the
     * transport's thread never runs application code: a continuation that blocks, even on
     * another call of this client, holds up only the completions behind it.
     */
    private final ExecutorService callbacks = Executors.newSingleThreadExecutor(r -> {
        Thread thread = new Thread(r, "rebound-callbacks");
        thread.setDaemon(true);
        return thread;
    });
    private volatile Publisher sharedPublisher;

    private ReboundClient(String url, ManagedChannel channel, Channel authorized) {
        this.url = url;
        this.channel = channel;
        this.authorized = authorized;
        this.messaging = MessagingGrpc.newBlockingStub(authorized).withMaxInboundMessageSize(MAX_GRPC_MESSAGE).withMaxOutboundMessageSize(MAX_GRPC_MESSAGE);
        this.admin = new Admin(authorized);
    }

    /** Connects to {@code url} ({@code http://host:port} or {@code host:port}) without TLS or login. */
    public static ReboundClient connect(String url) {
        return connect(url, ConnectOptions.defaults());
    }

    /**
     * Connects to {@code url}; an {@code https://} URL connects over TLS with {@code options}' CA
     * (refused without one, rather than dialled in plaintext). Fails with {@code UNAVAILABLE} if the
     * broker cannot be reached within 5 s.
     */
    public static ReboundClient connect(String url, ConnectOptions options) {
        URI uri = parse(url);
        ChannelCredentials credentials = switch (uri.getScheme().toLowerCase()) {
            case "http" -> InsecureChannelCredentials.create();
            case "https" -> tls(url, options);
            default -> throw new IllegalArgumentException("invalid server URL '" + url + "': unsupported scheme '" + uri.getScheme() + "', use http:// or https://");
        };
        ManagedChannel channel = Grpc.newChannelBuilderForAddress(uri.getHost(), uri.getPort(), credentials)
                .maxInboundMessageSize(MAX_GRPC_MESSAGE)
                // The client's own callbacks only file answers and wake waiters (completions go
                // to `callbacks`): running them on the transport's thread saves a thread hop per message.
                .directExecutor()
                // grpc's transparent retry keeps a copy of every message a stream sends until the
                // call ends; the client already says what a broken stream leaves unconfirmed.
                .disableRetry()
                .build();
        Channel authorized = options.user()
                .map(user -> io.grpc.ClientInterceptors.intercept(channel, authorization(user, options.password())))
                .orElse(channel);
        ReboundClient client = new ReboundClient(url, channel, authorized);
        try {
            client.awaitReady();
        } catch (RuntimeException e) {
            channel.shutdownNow();
            throw e;
        }
        return client;
    }

    private static URI parse(String url) {
        String full = url.contains("://") ? url : "http://" + url;
        try {
            URI uri = new URI(full);
            if (uri.getHost() == null || uri.getPort() < 0) {
                throw new IllegalArgumentException("invalid server URL '" + url + "': it needs a host and a port, e.g. http://127.0.0.1:61616");
            }
            return uri;
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("invalid server URL '" + url + "': " + e.getMessage(), e);
        }
    }

    private static ChannelCredentials tls(String url, ConnectOptions options) {
        if (options.caCert().isEmpty()) {
            throw new IllegalArgumentException("TLS needs the CA certificate that signed the broker's: give ConnectOptions.caCert to connect to '"
                    + url + "', or use http:// (the connection will not be encrypted)");
        }
        if (options.clientCert().isPresent() != options.clientKey().isPresent()) {
            throw new IllegalArgumentException("TLS: a client certificate needs its key, and a key its certificate");
        }
        try {
            TlsChannelCredentials.Builder tls = TlsChannelCredentials.newBuilder().trustManager(options.caCert().get().toFile());
            if (options.clientCert().isPresent()) {
                tls.keyManager(options.clientCert().get().toFile(), options.clientKey().get().toFile());
            }
            return tls.build();
        } catch (IOException e) {
            throw new IllegalArgumentException("TLS: cannot read a certificate or key file: " + e.getMessage(), e);
        }
    }

    /** Sends {@code authorization: Basic base64(user:password)} with every call; the broker checks each call and stream. */
    private static ClientInterceptor authorization(String user, String password) {
        Metadata.Key<String> key = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
        String value = "Basic " + Base64.getEncoder().encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
        return new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions callOptions, Channel next) {
                return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, callOptions)) {
                    @Override
                    public void start(Listener<R> listener, Metadata headers) {
                        headers.put(key, value);
                        super.start(listener, headers);
                    }
                };
            }
        };
    }

    /** Waits until the connection is up, as the Rust client's connect does. */
    private void awaitReady() {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CONNECT_TIMEOUT_MS);
        ConnectivityState state = channel.getState(true);
        while (state != ConnectivityState.READY) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new ReboundException(io.grpc.Status.Code.UNAVAILABLE, "cannot connect to " + url + ": the broker was not reachable within "
                        + CONNECT_TIMEOUT_MS + " ms (last state " + state + ")");
            }
            CountDownLatch changed = new CountDownLatch(1);
            channel.notifyWhenStateChanged(state, changed::countDown);
            try {
                changed.await(left, TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new ReboundException(io.grpc.Status.Code.CANCELLED, "interrupted while connecting to " + url, e);
            }
            state = channel.getState(true);
        }
    }

    /** The URL this client was connected with. */
    public String url() {
        return url;
    }

    /** Sends one message and returns its id, once it is on disk if durable. */
    public long send(OutgoingMessage message) {
        return sendBatch(List.of(message)).messageIds().get(0);
    }

    /** Sends a batch, accepted or refused together (one storage commit), and returns the broker's answer. */
    public SendResult sendBatch(List<OutgoingMessage> messages) {
        SendRequest.Builder request = SendRequest.newBuilder();
        messages.forEach(m -> request.addMessages(m.toProto()));
        try {
            return SendResult.from(messaging.send(request.build()));
        } catch (StatusRuntimeException e) {
            throw ReboundException.from(e);
        }
    }

    /**
     * Sends one message through the client's shared {@link Publisher}: concurrent calls share one
     * Publish stream and commit. The future completes with the id once the message is durable.
     */
    public CompletableFuture<Long> sendAsync(OutgoingMessage message) {
        Publisher publisher = sharedPublisher;
        if (publisher == null) {
            synchronized (this) {
                if (sharedPublisher == null) {
                    sharedPublisher = publisher();
                }
                publisher = sharedPublisher;
            }
        }
        return publisher.send(message);
    }

    /** A new publisher with the default options: its own Publish stream. */
    public Publisher publisher() {
        return publisher(PublisherOptions.defaults());
    }

    public Publisher publisher(PublisherOptions options) {
        return new Publisher(MessagingGrpc.newStub(authorized).withMaxOutboundMessageSize(MAX_GRPC_MESSAGE), options, callbacks);
    }

    /** Options of a consumer of {@code queue}; {@link ConsumerBuilder#open()} subscribes. */
    public ConsumerBuilder consumer(String queue) {
        return new ConsumerBuilder(MessagingGrpc.newStub(authorized).withMaxInboundMessageSize(MAX_GRPC_MESSAGE), queue);
    }

    /** Opens a transacted session (a Transact stream) for {@link Session#begin()}. */
    public Session session() {
        return new Session(MessagingGrpc.newStub(authorized).withMaxOutboundMessageSize(MAX_GRPC_MESSAGE));
    }

    /** Management calls: queues, addresses, browsing, dead-letter retry and move. */
    public Admin admin() {
        return admin;
    }

    /** Makes the next call try to connect at once instead of waiting out grpc's reconnect backoff. */
    public void resetConnectBackoff() {
        channel.resetConnectBackoff();
    }

    /** Closes the shared publisher (after its messages are answered) and the connection. */
    @Override
    public void close() {
        Publisher publisher = sharedPublisher;
        if (publisher != null) {
            publisher.close();
        }
        channel.shutdown();
        callbacks.shutdown();
        try {
            if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
                channel.shutdownNow();
            }
        } catch (InterruptedException e) {
            channel.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }
}
