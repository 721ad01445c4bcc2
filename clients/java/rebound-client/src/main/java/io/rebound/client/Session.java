package io.rebound.client;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import rebound.v1.MessagingGrpc;
import rebound.v1.MessagingOuterClass.Begin;
import rebound.v1.MessagingOuterClass.TransactRequest;
import rebound.v1.MessagingOuterClass.TransactResponse;

/**
 * A transacted session (one Transact stream), from {@link ReboundClient#session()}: the
 * transactions begun on it belong to it. When it is closed or its connection breaks, the broker
 * rolls back every transaction of it still open. Thread-safe: requests from several threads are
 * pipelined, each answered in turn.
 */
public final class Session implements AutoCloseable {
    private final Object lock = new Object();
    private final Map<Long, CompletableFuture<TransactResponse>> waiting = new HashMap<>();
    private final ClientCallStreamObserver<TransactRequest> requests;
    private long nextRequest = 1;
    /** Why the stream ended; {@code null} while it is open. */
    private ReboundException ended;

    Session(MessagingGrpc.MessagingStub stub) {
        Answers answers = new Answers();
        stub.transact(answers);
        this.requests = answers.stream;
    }

    /** Begins a transaction. */
    public Transaction begin() {
        TransactResponse answer = call(TransactRequest.newBuilder().setBegin(Begin.getDefaultInstance()));
        return new Transaction(this, expect(answer, TransactResponse.KindCase.BEGUN).getBegun().getTransactionId());
    }

    /** Whether the stream is still open (false once the broker or the connection ended it). */
    public boolean isOpen() {
        synchronized (lock) {
            return ended == null;
        }
    }

    /** Ends the session; the broker rolls back its open transactions. */
    @Override
    public void close() {
        synchronized (lock) {
            if (ended == null) {
                requests.onCompleted();
            }
        }
    }

    /** Sends one request and waits for its answer; a {@code TransactError} becomes a {@link ReboundException}. */
    TransactResponse call(TransactRequest.Builder request) {
        CompletableFuture<TransactResponse> answer = new CompletableFuture<>();
        synchronized (lock) {
            if (ended != null) {
                throw ended;
            }
            long id = nextRequest++;
            waiting.put(id, answer);
            requests.onNext(request.setRequestId(id).build());
        }
        TransactResponse response;
        try {
            response = answer.get();
        } catch (ExecutionException e) {
            throw (ReboundException) e.getCause();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ReboundException(Status.Code.CANCELLED, "interrupted while waiting for the broker", e);
        }
        if (response.getKindCase() == TransactResponse.KindCase.ERROR) {
            throw new ReboundException(Status.fromCodeValue(response.getError().getCode()).getCode(), response.getError().getMessage());
        }
        return response;
    }

    static TransactResponse expect(TransactResponse response, TransactResponse.KindCase kind) {
        if (response.getKindCase() != kind) {
            throw new ReboundException(Status.Code.INTERNAL, "protocol violation: expected " + kind + ", got " + response.getKindCase());
        }
        return response;
    }

    private final class Answers implements ClientResponseObserver<TransactRequest, TransactResponse> {
        ClientCallStreamObserver<TransactRequest> stream;

        @Override
        public void beforeStart(ClientCallStreamObserver<TransactRequest> stream) {
            this.stream = stream;
        }

        @Override
        public void onNext(TransactResponse response) {
            CompletableFuture<TransactResponse> answer;
            synchronized (lock) {
                answer = waiting.remove(response.getRequestId());
            }
            if (answer != null) {
                answer.complete(response);
            }
        }

        @Override
        public void onError(Throwable error) {
            ReboundException status = ReboundException.from(error);
            end(new StreamClosedException(status.code(), status.reason(), error));
        }

        @Override
        public void onCompleted() {
            end(new StreamClosedException(Status.Code.UNAVAILABLE, "the broker ended the transacted session", null));
        }

        private void end(ReboundException why) {
            Map<Long, CompletableFuture<TransactResponse>> failed;
            synchronized (lock) {
                ended = why;
                failed = new HashMap<>(waiting);
                waiting.clear();
            }
            failed.values().forEach(answer -> answer.completeExceptionally(why));
        }
    }
}
