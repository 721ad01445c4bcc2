package io.rebound.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.grpc.Status;
import io.rebound.client.ConnectOptions;
import io.rebound.client.OutgoingMessage;
import io.rebound.client.ReboundClient;
import io.rebound.client.ReboundException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import rebound.v1.AdminOuterClass.RoutingType;

/** TLS with a CA and a client certificate, and a login with user and password. Certificates are made with openssl. */
@ExtendWith(Broker.Required.class)
@Timeout(60)
class SecurityTest {
    static Path pki;
    static Broker broker;

    @BeforeAll
    static void start() throws Exception {
        pki = Files.createTempDirectory("rebound-java-pki-");
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key",
                "-out", "ca.pem", "-days", "2", "-subj", "/CN=rebound test CA");
        leaf("server", "127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
        leaf("alice", "alice", "extendedKeyUsage=clientAuth\n");
        String hash = hash("alice-secret");
        broker = Broker.start("""
                [tls]
                cert-file = "%s"
                key-file = "%s"
                client-ca-file = "%s"

                [[users]]
                name = "alice"
                password-hash = "%s"
                roles = ["all"]

                [[security-settings]]
                match = "#"
                send = ["all"]
                consume = ["all"]
                browse = ["all"]
                create-address = ["all"]
                create-queue = ["all"]
                manage = ["all"]
                """.formatted(pki.resolve("server.pem"), pki.resolve("server.key"), pki.resolve("ca.pem"), hash));
    }

    @AfterAll
    static void stop() throws IOException {
        if (broker != null) {
            broker.close();
        }
        if (pki != null) {
            try (var files = Files.walk(pki)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    String url() {
        return "https://" + broker.address();
    }

    @Test
    void aUserLogsInWithItsPasswordOverTls() {
        ConnectOptions options = ConnectOptions.defaults().caCert(pki.resolve("ca.pem")).credentials("alice", "alice-secret");
        try (ReboundClient client = ReboundClient.connect(url(), options)) {
            client.admin().createQueue("secure", "secure", RoutingType.ROUTING_TYPE_ANYCAST, true);
            assertTrue(client.send(new OutgoingMessage("secure", "over tls")) > 0);
        }
    }

    @Test
    void aWrongPasswordIsRefusedAsUnauthenticated() {
        ConnectOptions options = ConnectOptions.defaults().caCert(pki.resolve("ca.pem")).credentials("alice", "wrong");
        try (ReboundClient client = ReboundClient.connect(url(), options)) {
            ReboundException e = assertThrows(ReboundException.class, () -> client.send(new OutgoingMessage("secure", "x")));
            assertEquals(Status.Code.UNAUTHENTICATED, e.code());
        }
    }

    @Test
    void aClientCertificateLogsInAsTheUserItNames() {
        ConnectOptions options = ConnectOptions.defaults().caCert(pki.resolve("ca.pem"))
                .clientCertificate(pki.resolve("alice.pem"), pki.resolve("alice.key"));
        try (ReboundClient client = ReboundClient.connect(url(), options)) {
            client.admin().createQueue("by-cert", "by-cert", RoutingType.ROUTING_TYPE_ANYCAST, true);
            client.send(new OutgoingMessage("by-cert", "by cert"));
            assertEquals("by cert", client.admin().browse("by-cert", 1).get(0).message().text());
        }
    }

    @Test
    void withoutLoginNothingIsAllowed() {
        try (ReboundClient client = ReboundClient.connect(url(), ConnectOptions.defaults().caCert(pki.resolve("ca.pem")))) {
            ReboundException e = assertThrows(ReboundException.class, () -> client.send(new OutgoingMessage("secure", "x")));
            assertEquals(Status.Code.UNAUTHENTICATED, e.code());
        }
    }

    private static void leaf(String name, String cn, String extensions) throws Exception {
        Files.writeString(pki.resolve(name + ".ext"), extensions);
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", name + ".key",
                "-out", name + ".csr", "-subj", "/CN=" + cn);
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
                "-out", name + ".pem", "-extfile", name + ".ext");
    }

    private static void openssl(String... args) throws Exception {
        List<String> command = new java.util.ArrayList<>(List.of("openssl"));
        command.addAll(List.of(args));
        Process p;
        try {
            p = new ProcessBuilder(command).directory(pki.toFile()).redirectErrorStream(true).start();
        } catch (IOException e) {
            String reason = "openssl is needed to make the test certificates: " + e.getMessage();
            if ("true".equals(System.getenv("CI"))) {
                fail(reason);
            }
            System.out.println("SKIPPED: " + reason);
            Assumptions.abort("SKIPPED: " + reason);
            return;
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0, "openssl " + String.join(" ", args) + ":\n" + out);
    }

    /** The password's argon2id hash, from {@code rebound user hash-password}. */
    private static String hash(String password) throws Exception {
        Process p = new ProcessBuilder(Broker.binary().toString(), "user", "hash-password").start();
        p.getOutputStream().write((password + "\n").getBytes(StandardCharsets.UTF_8));
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0, "hash-password failed");
        return out;
    }
}
