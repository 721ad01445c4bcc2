package io.rebound.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.google.protobuf.ByteString;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import io.rebound.client.Consumer;
import io.rebound.client.ConsumerBuilder;
import io.rebound.client.ReboundClient;
import io.rebound.jms.ReboundConnectionFactory;
import jakarta.jms.Connection;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import rebound.v1.MessagingGrpc;
import rebound.v1.MessagingOuterClass.ConsumeRequest;
import rebound.v1.MessagingOuterClass.ConsumeResponse;
import rebound.v1.MessagingOuterClass.Deliveries;
import rebound.v1.MessagingOuterClass.Delivery;
import rebound.v1.MessagingOuterClass.Settled;
import rebound.v1.MessagingOuterClass.Subscribed;
import rebound.v1.MessagingOuterClass.Voided;

/**
 * A consume stream that moved to its queue's next node: the broker voids what the previous node
 * took back. Against a fake broker that does so on cue (no broker binary): it delivers 1, 2 and 3,
 * and answers the settle of 1 only after voiding 2, 3 and an id it never delivered, so that once
 * the settle is flushed the client has filed the voids too.
 */
@Timeout(60)
class VoidedTest {
    static final Duration WAIT = Duration.ofSeconds(10);

    @ParameterizedTest(name = "window {0}")
    @ValueSource(booleans = {true, false})
    void voidedDeliveriesNotYetReturnedAreDroppedAndTheirCreditGrantedAgain(boolean window) throws IOException {
        try (FakeBroker fake = new FakeBroker(); ReboundClient client = ReboundClient.connect(fake.url())) {
            ConsumerBuilder builder = client.consumer("orders");
            Consumer consumer = (window ? builder.window(3) : builder.manualCredit(3)).open();
            var first = consumer.next(WAIT);
            assertNotNull(first);
            assertEquals(1, first.id());
            consumer.ack(1);
            assertEquals(List.of(), consumer.flush(), "voided ids are no settle's unknown ids");
            assertNull(consumer.next(Duration.ofMillis(200)), "2 and 3 were voided before the application had them");
            consumer.close();
            // The window grants 1 for the ack; both modes grant the 2 voided unseen again.
            assertEquals(window ? List.of(1, 2) : List.of(2), fake.credits);
        }
    }

    @Test
    void aJmsConsumerDropsVoidedPrefetchedMessages() throws Exception {
        try (FakeBroker fake = new FakeBroker()) {
            ReboundConnectionFactory factory = new ReboundConnectionFactory(fake.url());
            factory.setPrefetch(3);
            try (Connection connection = factory.createConnection()) {
                Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                MessageConsumer consumer = session.createConsumer(session.createQueue("orders"));
                connection.start();
                Message first = consumer.receive(WAIT.toMillis());
                assertNotNull(first);
                first.acknowledge();
                assertNull(consumer.receiveNoWait(), "2 and 3 were voided before the application had them");
                consumer.close();
            }
            // One credit per message handed out, and the 2 voided unseen again.
            assertEquals(List.of(1, 2), fake.credits);
        }
    }

    /** One Consume at a time, on a free loopback port; records the credit the client grants. */
    static final class FakeBroker extends MessagingGrpc.MessagingImplBase implements AutoCloseable {
        final List<Integer> credits = new CopyOnWriteArrayList<>();
        private final Server server;

        FakeBroker() throws IOException {
            server = NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), InsecureServerCredentials.create())
                    .addService(this)
                    .build()
                    .start();
        }

        String url() {
            return "http://127.0.0.1:" + server.getPort();
        }

        @Override
        public StreamObserver<ConsumeRequest> consume(StreamObserver<ConsumeResponse> responses) {
            return new StreamObserver<>() {
                @Override
                public void onNext(ConsumeRequest request) {
                    switch (request.getKindCase()) {
                        case SUBSCRIBE -> {
                            String queue = request.getSubscribe().getQueue();
                            responses.onNext(ConsumeResponse.newBuilder().setSubscribed(Subscribed.newBuilder().setQueue(queue).setAddress(queue)).build());
                            Deliveries.Builder deliveries = Deliveries.newBuilder();
                            for (long id = 1; id <= 3; id++) {
                                deliveries.addDeliveries(Delivery.newBuilder()
                                        .setDeliveryId(id)
                                        .setMessage(rebound.v1.MessagingOuterClass.Message.newBuilder()
                                                .setMessageId(100 + id)
                                                .setAddress(queue)
                                                .setBody(ByteString.copyFromUtf8("message " + id)))
                                        .setDeliveryCount(1)
                                        .setQueue(queue));
                            }
                            responses.onNext(ConsumeResponse.newBuilder().setDeliveries(deliveries).build());
                        }
                        case SETTLE -> {
                            // The stream moved on before this settle was answered.
                            responses.onNext(ConsumeResponse.newBuilder().setVoided(Voided.newBuilder().addDeliveryIds(2).addDeliveryIds(3)).build());
                            responses.onNext(ConsumeResponse.newBuilder().setVoided(Voided.newBuilder().addDeliveryIds(7)).build());
                            responses.onNext(ConsumeResponse.newBuilder()
                                    .setSettled(Settled.newBuilder().addAllDeliveryIds(request.getSettle().getDeliveryIdsList()))
                                    .build());
                        }
                        case CREDIT -> credits.add(request.getCredit().getCredit());
                        default -> { }
                    }
                }

                @Override
                public void onError(Throwable error) {
                    // The client went away: nothing to answer.
                }

                @Override
                public void onCompleted() {
                    responses.onCompleted();
                }
            };
        }

        @Override
        public void close() {
            server.shutdownNow();
            try {
                server.awaitTermination(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
