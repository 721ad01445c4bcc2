package io.rebound.client;

import io.grpc.Status;

/**
 * A consume or transact stream ended (broker stopping, connection lost) while answers were
 * expected; {@link #code()} says how (UNAVAILABLE for a lost connection).
 */
public final class StreamClosedException extends ReboundException {
    private static final long serialVersionUID = 1L;

    public StreamClosedException(Status.Code code, String why, Throwable cause) {
        super(code, "the stream was closed: " + why, cause);
    }
}
