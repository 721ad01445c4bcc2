package io.rebound.tests.parity;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP forwarder on a free port of 127.0.0.1 to a broker, whose {@link #cut()} drops every
 * connection through it at once: a client connection that dies (a crashed client, a network
 * failure) without the client closing anything, for either broker's protocol.
 */
final class Proxy implements AutoCloseable {
    private final ServerSocket server;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();

    /** Forwards to {@code address}, a {@code host:port}. */
    Proxy(String address) {
        String host = address.substring(0, address.lastIndexOf(':'));
        int port = Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
        try {
            server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        daemon("proxy-accept", () -> {
            while (!server.isClosed()) {
                try {
                    Socket client = server.accept();
                    Socket broker = new Socket(host, port);
                    sockets.add(client);
                    sockets.add(broker);
                    daemon("proxy-up", () -> pump(client, broker));
                    daemon("proxy-down", () -> pump(broker, client));
                } catch (IOException e) {
                    // Closed, or the broker refused: the client sees its connection fail.
                }
            }
        });
    }

    /** {@code host:port} to connect to instead of the broker's. */
    String address() {
        return "127.0.0.1:" + server.getLocalPort();
    }

    /** Drops every connection through the proxy; new ones are still forwarded. */
    void cut() {
        sockets.forEach(Proxy::closeQuietly);
        sockets.clear();
    }

    @Override
    public void close() throws IOException {
        server.close();
        cut();
    }

    private static void pump(Socket from, Socket to) {
        try {
            from.getInputStream().transferTo(to.getOutputStream());
        } catch (IOException e) {
            // One side was cut.
        } finally {
            closeQuietly(from);
            closeQuietly(to);
        }
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // Already closed.
        }
    }

    private static void daemon(String name, Runnable body) {
        Thread thread = new Thread(body, name);
        thread.setDaemon(true);
        thread.start();
    }
}
