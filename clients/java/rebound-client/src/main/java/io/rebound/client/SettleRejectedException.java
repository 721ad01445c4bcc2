package io.rebound.client;

/**
 * The broker could not apply a settle (for example an ack in an unknown or finished transaction);
 * its deliveries are still outstanding and can be settled again.
 */
public final class SettleRejectedException extends ReboundException {
    private static final long serialVersionUID = 1L;

    public SettleRejectedException(String why) {
        super("the broker could not apply a settle: " + why, null);
    }
}
