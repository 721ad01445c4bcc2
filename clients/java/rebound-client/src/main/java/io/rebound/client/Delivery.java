package io.rebound.client;

import rebound.v1.MessagingOuterClass;

/**
 * One delivery of a message to a {@link Consumer}.
 *
 * @param id names this delivery when settling it; unique on its stream
 * @param deliveryCount 1 on the first delivery, incremented by every failed attempt (JMSXDeliveryCount)
 * @param redelivered whether it was delivered before ({@code deliveryCount > 1})
 * @param queue the queue it was delivered from
 */
public record Delivery(long id, Message message, int deliveryCount, boolean redelivered, String queue) {
    static Delivery from(MessagingOuterClass.Delivery d) {
        return new Delivery(d.getDeliveryId(), Message.from(d.getMessage()), d.getDeliveryCount(), d.getRedelivered(), d.getQueue());
    }
}
