package io.rebound.client;

import java.util.List;
import rebound.v1.MessagingOuterClass.SendResponse;

/**
 * The broker's answer to a send.
 *
 * @param messageIds the id of each message, in request order
 * @param unrouted how many found no queue on their address and were dropped
 * @param duplicates per message, whether it was a duplicate (acknowledged, not stored again); empty when none was
 */
public record SendResult(List<Long> messageIds, int unrouted, List<Boolean> duplicates) {
    static SendResult from(SendResponse r) {
        return new SendResult(List.copyOf(r.getMessageIdsList()), r.getUnrouted(), List.copyOf(r.getDuplicatesList()));
    }

    /** Whether message {@code index} of the request was a duplicate. */
    public boolean duplicate(int index) {
        return index < duplicates.size() && duplicates.get(index);
    }
}
