package io.rebound.client;

/**
 * Thrown by a {@link MessageHandler}: the message can never be processed (malformed, refused by
 * business rules). The listener dead-letters it at once, with this message as the reason.
 */
public class PermanentFailureException extends Exception {
    private static final long serialVersionUID = 1L;

    public PermanentFailureException(String reason) {
        super(reason);
    }

    public PermanentFailureException(String reason, Throwable cause) {
        super(reason, cause);
    }
}
