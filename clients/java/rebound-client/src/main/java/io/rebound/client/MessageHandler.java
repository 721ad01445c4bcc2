package io.rebound.client;

/**
 * The work a {@link Listener} runs per message. Returning acks the message (or commits its
 * transaction); what it throws says what happens to it: see {@link Listener}.
 */
@FunctionalInterface
public interface MessageHandler {
    void onMessage(Incoming incoming) throws Exception;
}
