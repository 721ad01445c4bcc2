package io.rebound.client;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import rebound.v1.MessagingGrpc;
import rebound.v1.MessagingOuterClass;
import rebound.v1.MessagingOuterClass.PublishRequest;
import rebound.v1.MessagingOuterClass.PublishResponse;

/**
 * A producer whose concurrent sends share one Publish stream, with natural batching: a frame (one
 * request, one storage commit on the broker) goes as soon as fewer than
 * {@link PublisherOptions#maxFramesInFlight()} frames are unanswered, so an idle publisher adds no
 * delay, and the messages sent meanwhile are coalesced into the next frame. Thread-safe.
 *
 * <p>Each {@link #send} returns a future completed with the message's id once the broker has
 * stored it (on disk if durable). It fails with a {@link ReboundException} carrying the broker's
 * status when the broker refuses the message (nothing stored; a refused frame of several callers'
 * messages is sent again one message per frame so that each caller gets its own answer), and with
 * {@link UnconfirmedException} when the stream broke before the answer came: the message may or
 * may not have been stored. Messages not yet sent then go on a new stream. The futures complete
 * on the client's callback thread, in send order: a continuation that blocks holds up the ones
 * behind it (use the {@code *Async} variants for long work).
 */
public final class Publisher implements AutoCloseable {
    private final MessagingGrpc.MessagingStub stub;
    private final PublisherOptions options;
    private final Semaphore room;
    private final Executor callbacks;
    private final Object lock = new Object();
    /** Queued, not yet sent. */
    private final ArrayDeque<Queued> waiting = new ArrayDeque<>();
    /** From a refused frame, sent again one per frame, before {@link #waiting}. */
    private final ArrayDeque<Queued> alone = new ArrayDeque<>();
    private Stream stream;
    private boolean closed;
    private final AtomicLong frames = new AtomicLong();
    private final AtomicLong unrouted = new AtomicLong();
    private final AtomicLong duplicates = new AtomicLong();

    Publisher(MessagingGrpc.MessagingStub stub, PublisherOptions options, Executor callbacks) {
        this.stub = stub;
        this.options = options;
        this.callbacks = callbacks;
        this.room = new Semaphore(options.maxPending());
    }

    /** Sends one message; waits only when {@link PublisherOptions#maxPending()} messages are already pending. */
    public CompletableFuture<Long> send(OutgoingMessage message) {
        CompletableFuture<Long> answer = new CompletableFuture<>();
        try {
            room.acquire();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            answer.completeExceptionally(new ReboundException(Status.Code.CANCELLED, "interrupted while waiting for room in the publisher", e));
            return answer;
        }
        answer.whenComplete((id, error) -> room.release());
        Queued queued = new Queued(message.toProto(), answer);
        List<Runnable> answers = new ArrayList<>();
        synchronized (lock) {
            if (closed) {
                answer.completeExceptionally(new UnconfirmedException("the publisher is closed", null));
                return answer;
            }
            waiting.add(queued);
            pump(answers);
        }
        give(answers);
        return answer;
    }

    /** Completes the futures of {@code answers} off the caller's (the transport's) thread, in order. */
    private void give(List<Runnable> answers) {
        if (!answers.isEmpty()) {
            callbacks.execute(() -> answers.forEach(Runnable::run));
        }
    }

    /** Frames (Publish requests) sent so far, on every stream of this publisher. */
    public long framesSent() {
        return frames.get();
    }

    /** Messages sent so far that found no queue on their address and were dropped. */
    public long unrouted() {
        return unrouted.get();
    }

    /** Messages sent so far that were duplicates: acknowledged, not stored again. */
    public long duplicates() {
        return duplicates.get();
    }

    /** Takes no more messages; the stream ends once the messages already queued are answered. */
    @Override
    public void close() {
        synchronized (lock) {
            closed = true;
            endIfIdle();
        }
    }

    private void endIfIdle() {
        if (closed && stream != null && waiting.isEmpty() && alone.isEmpty() && stream.inFlight.isEmpty()) {
            stream.requests.onCompleted();
            stream = null;
        }
    }

    /** Sends frames while the window has room. Under {@link #lock}; answers to give go to {@code answers}, run once it is released. */
    private void pump(List<Runnable> answers) {
        while (stream == null || stream.inFlight.size() < options.maxFramesInFlight()) {
            if (alone.isEmpty() && waiting.isEmpty()) {
                return;
            }
            if (stream == null) {
                Stream opened = new Stream();
                stream = opened;
                stub.publish(opened);
                if (stream != opened) {
                    // It failed at once (the callbacks run on this thread): what waited has its answer.
                    continue;
                }
            }
            List<Queued> items = alone.isEmpty() ? takeBatch() : List.of(alone.poll());
            PublishRequest.Builder request = PublishRequest.newBuilder().setSequence(stream.nextSequence++);
            items.forEach(item -> request.addMessages(item.message));
            stream.inFlight.add(new Frame(request.getSequence(), items));
            stream.requests.onNext(request.build());
            frames.incrementAndGet();
        }
    }

    private List<Queued> takeBatch() {
        List<Queued> items = new ArrayList<>();
        int bytes = 0;
        while (!waiting.isEmpty()) {
            int size = waiting.peek().message.getSerializedSize();
            if (!items.isEmpty() && (items.size() >= options.maxBatch() || bytes + size > options.maxBatchBytes())) {
                break;
            }
            bytes += size;
            items.add(waiting.poll());
        }
        return items;
    }

    /** Gives a frame's callers their answers; returns why the stream must be dropped when the answer breaks the protocol. */
    private String settle(Frame frame, PublishResponse response, List<Runnable> answers) {
        switch (response.getResultCase()) {
            case SENT -> {
                MessagingOuterClass.SendResponse sent = response.getSent();
                if (sent.getMessageIdsCount() != frame.items.size()) {
                    break;
                }
                unrouted.addAndGet(sent.getUnrouted());
                duplicates.addAndGet(sent.getDuplicatesList().stream().filter(d -> d).count());
                for (int i = 0; i < frame.items.size(); i++) {
                    Queued item = frame.items.get(i);
                    long id = sent.getMessageIds(i);
                    answers.add(() -> item.answer.complete(id));
                }
                return null;
            }
            case ERROR -> {
                Status.Code code = Status.fromCodeValue(response.getError().getCode()).getCode();
                if (frame.items.size() > 1 && refusedForAMessage(code)) {
                    alone.addAll(frame.items);
                } else {
                    ReboundException error = new ReboundException(code, response.getError().getMessage());
                    frame.items.forEach(item -> answers.add(() -> item.answer.completeExceptionally(error)));
                }
                return null;
            }
            default -> { }
        }
        String why = "a malformed answer to request " + frame.sequence;
        ReboundException error = new ReboundException(Status.Code.INTERNAL, "protocol violation: " + why);
        frame.items.forEach(item -> answers.add(() -> item.answer.completeExceptionally(error)));
        return why;
    }

    /** Refusals that a single message can cause, all made before anything is stored. */
    private static boolean refusedForAMessage(Status.Code code) {
        return switch (code) {
            case INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ALREADY_EXISTS, OUT_OF_RANGE -> true;
            default -> false;
        };
    }

    private record Queued(MessagingOuterClass.OutgoingMessage message, CompletableFuture<Long> answer) {}

    private record Frame(long sequence, List<Queued> items) {}

    /** One Publish stream and its unanswered frames, oldest first; callbacks of a stream that was replaced are ignored. */
    private final class Stream implements ClientResponseObserver<PublishRequest, PublishResponse> {
        final ArrayDeque<Frame> inFlight = new ArrayDeque<>();
        long nextSequence = 1;
        ClientCallStreamObserver<PublishRequest> requests;
        /** Whether the broker answered anything on it: a stream that never did could not be opened. */
        boolean answered;

        @Override
        public void beforeStart(ClientCallStreamObserver<PublishRequest> requests) {
            this.requests = requests;
        }

        @Override
        public void onNext(PublishResponse response) {
            List<Runnable> answers = new ArrayList<>();
            synchronized (lock) {
                if (stream != this) {
                    return;
                }
                answered = true;
                Frame frame = inFlight.poll();
                String broken = frame == null || frame.sequence != response.getSequence()
                        ? "an answer to request " + response.getSequence() + " out of order"
                        : settle(frame, response, answers);
                if (broken != null) {
                    breakOff(broken, null, answers);
                    requests.cancel(broken, null);
                } else {
                    pump(answers);
                    endIfIdle();
                }
            }
            give(answers);
        }

        @Override
        public void onError(Throwable error) {
            List<Runnable> answers = new ArrayList<>();
            synchronized (lock) {
                if (stream == this) {
                    breakOff(ReboundException.from(error).getMessage(), error, answers);
                }
            }
            give(answers);
        }

        @Override
        public void onCompleted() {
            onError(Status.UNAVAILABLE.withDescription("the broker closed the stream").asRuntimeException());
        }

        /** The stream is gone: what it held is unconfirmed; what waits goes on a new one, unless this one never worked. */
        private void breakOff(String why, Throwable cause, List<Runnable> answers) {
            stream = null;
            UnconfirmedException unconfirmed = new UnconfirmedException(why, cause);
            inFlight.forEach(frame -> frame.items.forEach(item -> answers.add(() -> item.answer.completeExceptionally(unconfirmed))));
            if (answered) {
                pump(answers);
            } else {
                // Not sent: the callers learn why at once rather than retrying a broker that cannot be reached.
                ReboundException refused = cause == null ? new ReboundException(Status.Code.UNAVAILABLE, why) : ReboundException.from(cause);
                for (Queued item : alone) {
                    answers.add(() -> item.answer.completeExceptionally(refused));
                }
                for (Queued item : waiting) {
                    answers.add(() -> item.answer.completeExceptionally(refused));
                }
                alone.clear();
                waiting.clear();
            }
        }
    }
}
