package io.rebound.client;

import rebound.v1.MessagingGrpc;

/** Options of a new {@link Consumer}, from {@link ReboundClient#consumer}; {@link #open()} subscribes. */
public final class ConsumerBuilder {
    private static final int DEFAULT_WINDOW = 10;

    private final MessagingGrpc.MessagingStub stub;
    private final String queue;
    private int credit = DEFAULT_WINDOW;
    private boolean replenish = true;
    private String filter = "";

    ConsumerBuilder(MessagingGrpc.MessagingStub stub, String queue) {
        this.stub = stub;
        this.queue = queue;
    }

    /**
     * A steady window of {@code window} unsettled deliveries: one more credit is granted for every
     * settled delivery (and taken back from later grants if the broker refuses the settle). The
     * default, with a window of 10.
     */
    public ConsumerBuilder window(int window) {
        this.credit = window;
        this.replenish = true;
        return this;
    }

    /** {@code initialCredit} and no automatic credit: the broker delivers no more than granted here and by {@link Consumer#grant}. */
    public ConsumerBuilder manualCredit(int initialCredit) {
        this.credit = initialCredit;
        this.replenish = false;
        return this;
    }

    /** Only the messages this JMS selector matches (e.g. {@code color = 'red' AND weight > 2}); evaluated by the broker. */
    public ConsumerBuilder filter(String selector) {
        this.filter = selector == null ? "" : selector;
        return this;
    }

    /** Opens the Consume stream; returns once the broker has confirmed the subscription (a bad selector fails with INVALID_ARGUMENT). */
    public Consumer open() {
        return Consumer.open(stub, queue, credit, replenish, filter);
    }
}
