package io.rebound.client;

import java.util.Optional;

/**
 * A message handed to a {@link MessageHandler}.
 *
 * @param deliveryCount 1 on the first delivery, incremented by every failed attempt
 * @param redelivered whether a handler may already have seen it
 * @param transaction with a transacted listener, the message's transaction: what the handler sends
 *     in it is committed with the message's ack, or rolled back on failure
 */
public record Incoming(Message message, int deliveryCount, boolean redelivered, String queue, Optional<Transaction> transaction) {}
