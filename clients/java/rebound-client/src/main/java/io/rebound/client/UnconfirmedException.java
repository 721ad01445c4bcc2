package io.rebound.client;

/**
 * A send whose stream broke before the broker answered for it: the message may or may not have
 * been stored. Resend it with a duplicate id to be sure it is stored once.
 */
public final class UnconfirmedException extends ReboundException {
    private static final long serialVersionUID = 1L;

    public UnconfirmedException(String why, Throwable cause) {
        super("no confirmation from the broker, the message may or may not have been stored: " + why, cause);
    }
}
