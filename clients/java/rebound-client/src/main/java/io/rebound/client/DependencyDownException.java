package io.rebound.client;

import java.time.Duration;

/**
 * Thrown by a {@link MessageHandler}: something every message needs (a database, a service) is
 * down. The listener nacks the message pausing the whole queue for {@code pause} (outage mode:
 * then one probe message); the attempt does not count unless the address sets
 * outage-counts-attempts, so no message is dead-lettered because of the outage.
 */
public class DependencyDownException extends Exception {
    private static final long serialVersionUID = 1L;

    private final Duration pause;

    public DependencyDownException(String reason, Duration pause) {
        super(reason);
        this.pause = pause;
    }

    public Duration pause() {
        return pause;
    }
}
