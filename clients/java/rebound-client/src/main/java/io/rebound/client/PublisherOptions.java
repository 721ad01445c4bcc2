package io.rebound.client;

/**
 * How a {@link Publisher} batches. Defaults: two frames in flight, frames of at most 256 messages
 * or 1 MiB, and 10,000 messages queued or in flight (a send beyond waits for room).
 *
 * @param maxFramesInFlight frames sent and not yet answered, at most; more messages wait and are coalesced into the next frame
 * @param maxBatch messages in one frame, at most
 * @param maxBatchBytes encoded bytes of one frame's messages, at most (a larger message goes alone)
 * @param maxPending messages queued or in flight, at most
 */
public record PublisherOptions(int maxFramesInFlight, int maxBatch, int maxBatchBytes, int maxPending) {
    public PublisherOptions {
        if (maxFramesInFlight < 1 || maxBatch < 1 || maxBatchBytes < 1 || maxPending < 1) {
            throw new IllegalArgumentException("publisher options must all be at least 1: " + this);
        }
    }

    public static PublisherOptions defaults() {
        return new PublisherOptions(2, 256, 1 << 20, 10_000);
    }
}
