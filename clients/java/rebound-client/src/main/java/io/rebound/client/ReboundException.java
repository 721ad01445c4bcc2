package io.rebound.client;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * What can go wrong talking to rebound. Every failure of the broker reaches the client as a gRPC
 * status: {@link #code()} keeps it so that a program can branch on it, and the message reads like
 * {@code queue 'nope' not found (NOT_FOUND)}.
 */
public class ReboundException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final Status.Code code;
    private final String reason;

    public ReboundException(Status.Code code, String message) {
        this(code, message, null);
    }

    public ReboundException(Status.Code code, String message, Throwable cause) {
        super(message + " (" + code + ")", cause);
        this.code = code;
        this.reason = message;
    }

    /** For failures that are not a broker status (the subclasses say which). */
    protected ReboundException(String message, Throwable cause) {
        super(message, cause);
        this.code = Status.Code.UNKNOWN;
        this.reason = message;
    }

    /** The gRPC status code, e.g. {@code NOT_FOUND}; {@code UNKNOWN} for a client-side failure. */
    public Status.Code code() {
        return code;
    }

    /** The message without the code. */
    public String reason() {
        return reason;
    }

    /** The broker's status as an exception, keeping what failed underneath a transport error. */
    static ReboundException from(Throwable error) {
        if (error instanceof ReboundException rebound) {
            return rebound;
        }
        Status status = Status.fromThrowable(error);
        String message = status.getDescription() == null ? "" : status.getDescription();
        Throwable cause = status.getCause();
        while (cause != null && cause.getCause() != null) {
            cause = cause.getCause();
        }
        if (cause != null && cause.getMessage() != null && !message.contains(cause.getMessage())) {
            message = message.isEmpty() ? cause.getMessage() : message + ": " + cause.getMessage();
        }
        return new ReboundException(status.getCode(), message, error instanceof StatusRuntimeException ? error : status.asRuntimeException());
    }
}
