package io.rebound.client;

import io.grpc.Channel;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import rebound.v1.AdminGrpc;
import rebound.v1.AdminOuterClass.AddressInfo;
import rebound.v1.AdminOuterClass.BrowseQueueRequest;
import rebound.v1.AdminOuterClass.CountMessagesRequest;
import rebound.v1.AdminOuterClass.CreateAddressRequest;
import rebound.v1.AdminOuterClass.CreateQueueRequest;
import rebound.v1.AdminOuterClass.DeleteAddressRequest;
import rebound.v1.AdminOuterClass.DeleteQueueRequest;
import rebound.v1.AdminOuterClass.GetAddressRequest;
import rebound.v1.AdminOuterClass.GetQueueRequest;
import rebound.v1.AdminOuterClass.GetServerInfoRequest;
import rebound.v1.AdminOuterClass.GetSettingsRequest;
import rebound.v1.AdminOuterClass.GetServerInfoResponse;
import rebound.v1.AdminOuterClass.ListAddressesRequest;
import rebound.v1.AdminOuterClass.ListAddressesResponse;
import rebound.v1.AdminOuterClass.ListQueuesRequest;
import rebound.v1.AdminOuterClass.ListQueuesResponse;
import rebound.v1.AdminOuterClass.MessageSelection;
import rebound.v1.AdminOuterClass.MessageState;
import rebound.v1.AdminOuterClass.MoveMessagesRequest;
import rebound.v1.AdminOuterClass.PurgeQueueRequest;
import rebound.v1.AdminOuterClass.QueueInfo;
import rebound.v1.AdminOuterClass.RemoveMessagesRequest;
import rebound.v1.AdminOuterClass.RetryMessagesRequest;
import rebound.v1.AdminOuterClass.RetryMessagesResponse;
import rebound.v1.AdminOuterClass.RoutingType;
import rebound.v1.AdminOuterClass.SettingValue;

/**
 * Management calls, from {@link ReboundClient#admin()}: addresses and queues, their statistics,
 * browsing, and moving or retrying dead letters. Returns the protocol's own types
 * ({@link QueueInfo}, documented field by field in {@code admin.proto}) where they need no wrapping.
 */
public final class Admin {
    private final AdminGrpc.AdminBlockingStub stub;

    Admin(Channel channel) {
        this.stub = AdminGrpc.newBlockingStub(channel);
    }

    /** A message of a queue as browsing shows it, with its state ({@code READY}, {@code DELIVERING}, {@code SCHEDULED}). */
    public record BrowsedMessage(Message message, int deliveryCount, MessageState state, long scheduledAtMs) {}

    /** Creates an address; returns whether it was created (false: it existed). */
    public boolean createAddress(String name, RoutingType routingType) {
        return call(() -> stub.createAddress(CreateAddressRequest.newBuilder().setName(name).setRoutingType(routingType).build()).getCreated());
    }

    /** Deletes an address; {@code force} also deletes its queues and their messages (refused otherwise while it has queues). */
    public void deleteAddress(String name, boolean force) {
        call(() -> stub.deleteAddress(DeleteAddressRequest.newBuilder().setName(name).setForce(force).build()));
    }

    /** Every address, following the broker's pages. */
    public List<AddressInfo> listAddresses() {
        List<AddressInfo> addresses = new ArrayList<>();
        String token = "";
        do {
            String page = token;
            ListAddressesResponse response = call(() -> stub.listAddresses(ListAddressesRequest.newBuilder().setPageToken(page).build()));
            addresses.addAll(response.getAddressesList());
            token = response.getNextPageToken();
        } while (!token.isEmpty());
        return addresses;
    }

    /** The effective address-settings of {@code address}, each with the match that supplied it. */
    public List<SettingValue> settings(String address) {
        return call(() -> stub.getSettings(GetSettingsRequest.newBuilder().setAddress(address).build()).getSettingsList());
    }

    /** Creates a queue bound to {@code address} (created if missing). */
    public QueueInfo createQueue(String address, String queue, RoutingType routingType, boolean durable) {
        return call(() -> stub.createQueue(CreateQueueRequest.newBuilder().setAddress(address).setQueue(queue)
                .setRoutingType(routingType).setDurable(durable).build()).getQueue());
    }

    public void deleteQueue(String queue) {
        call(() -> stub.deleteQueue(DeleteQueueRequest.newBuilder().setQueue(queue).build()));
    }

    /** A queue's statistics: messages, delivering, scheduled, consumers, acked, dead-lettered, ... */
    public QueueInfo queue(String name) {
        return call(() -> stub.getQueue(GetQueueRequest.newBuilder().setQueue(name).build()).getQueue());
    }

    /** Every queue, following the broker's pages. */
    public List<QueueInfo> listQueues() {
        List<QueueInfo> queues = new ArrayList<>();
        String token = "";
        do {
            String page = token;
            ListQueuesResponse response = call(() -> stub.listQueues(ListQueuesRequest.newBuilder().setPageToken(page).build()));
            queues.addAll(response.getQueuesList());
            token = response.getNextPageToken();
        } while (!token.isEmpty());
        return queues;
    }

    public AddressInfo address(String name) {
        return call(() -> stub.getAddress(GetAddressRequest.newBuilder().setName(name).build()).getAddress());
    }

    /** Up to {@code limit} messages of the queue, oldest first, without consuming them. */
    public List<BrowsedMessage> browse(String queue, int limit) {
        return browse(queue, limit, "");
    }

    /** As {@link #browse(String, int)}, only the messages the selector matches. */
    public List<BrowsedMessage> browse(String queue, int limit, String selector) {
        BrowseQueueRequest request = BrowseQueueRequest.newBuilder().setQueue(queue).setLimit(limit).setFilter(selector).build();
        return call(() -> stub.browseQueue(request)).getMessagesList().stream()
                .map(b -> new BrowsedMessage(Message.from(b.getMessage()), b.getDeliveryCount(), b.getState(), b.getScheduledAtMs()))
                .toList();
    }

    public long countMessages(String queue, String selector) {
        return call(() -> stub.countMessages(CountMessagesRequest.newBuilder().setSelection(selection(queue, selector)).build()).getCount());
    }

    public long removeMessages(String queue, String selector) {
        return call(() -> stub.removeMessages(RemoveMessagesRequest.newBuilder().setSelection(selection(queue, selector)).build()).getRemoved());
    }

    /** Moves the selected messages of {@code queue} to {@code toAddress} (e.g. dead letters to a parking address); returns how many. */
    public long moveMessages(String queue, String selector, String toAddress) {
        return call(() -> stub.moveMessages(MoveMessagesRequest.newBuilder().setSelection(selection(queue, selector)).setToAddress(toAddress).build()).getMoved());
    }

    /**
     * Sends the selected dead letters of {@code queue} back to exactly the queue each first failed
     * on ({@code _AMQ_ORIG_QUEUE}), with a fresh delivery count. The answer says, per message, where
     * it went or why it was skipped.
     */
    public RetryMessagesResponse retryMessages(String queue, String selector) {
        return call(() -> stub.retryMessages(RetryMessagesRequest.newBuilder().setSelection(selection(queue, selector)).build()));
    }

    /** Removes every message of the queue; returns how many. */
    public long purge(String queue) {
        return call(() -> stub.purgeQueue(PurgeQueueRequest.newBuilder().setQueue(queue).build()).getRemoved());
    }

    public GetServerInfoResponse serverInfo() {
        return call(() -> stub.getServerInfo(GetServerInfoRequest.getDefaultInstance()));
    }

    private static MessageSelection selection(String queue, String selector) {
        return MessageSelection.newBuilder().setQueue(queue).setFilter(selector == null ? "" : selector).build();
    }

    private static <T> T call(Supplier<T> call) {
        try {
            return call.get();
        } catch (StatusRuntimeException e) {
            throw ReboundException.from(e);
        }
    }
}
