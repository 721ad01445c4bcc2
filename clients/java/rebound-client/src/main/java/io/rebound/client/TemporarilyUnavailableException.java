package io.rebound.client;

import java.time.Duration;
import java.util.Optional;

/**
 * Thrown by a {@link MessageHandler}: the message cannot be processed now but may be later. The
 * listener nacks it; it is redelivered after the address's redelivery delay, or after
 * {@code retryAfter} when given (capped by the broker's max-retry-after).
 */
public class TemporarilyUnavailableException extends Exception {
    private static final long serialVersionUID = 1L;

    private final Duration retryAfter;

    public TemporarilyUnavailableException(String reason) {
        this(reason, null);
    }

    public TemporarilyUnavailableException(String reason, Duration retryAfter) {
        super(reason);
        this.retryAfter = retryAfter;
    }

    public Optional<Duration> retryAfter() {
        return Optional.ofNullable(retryAfter);
    }
}
