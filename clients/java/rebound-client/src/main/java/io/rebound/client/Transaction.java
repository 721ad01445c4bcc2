package io.rebound.client;

import java.util.List;
import rebound.v1.MessagingOuterClass.Commit;
import rebound.v1.MessagingOuterClass.Rollback;
import rebound.v1.MessagingOuterClass.TransactRequest;
import rebound.v1.MessagingOuterClass.TransactResponse;
import rebound.v1.MessagingOuterClass.TransactionalSend;

/**
 * A local transaction of a {@link Session}: its sends are invisible until {@link #commit()}, and
 * the deliveries acked in it ({@link Consumer#ackIn}) are removed only then; {@link #rollback()}
 * discards the sends and returns the acked messages with their delivery count incremented.
 */
public final class Transaction {
    private final Session session;
    private final long id;

    Transaction(Session session, long id) {
        this.session = session;
        this.id = id;
    }

    /** The broker's id of this transaction. */
    public long id() {
        return id;
    }

    /** Sends a message in the transaction; returns the id it will have once committed. */
    public long send(OutgoingMessage message) {
        return sendBatch(List.of(message)).messageIds().get(0);
    }

    public SendResult sendBatch(List<OutgoingMessage> messages) {
        TransactionalSend.Builder send = TransactionalSend.newBuilder().setTransactionId(id);
        messages.forEach(m -> send.addMessages(m.toProto()));
        TransactResponse answer = session.call(TransactRequest.newBuilder().setSend(send));
        return SendResult.from(Session.expect(answer, TransactResponse.KindCase.SENT).getSent());
    }

    /** Makes every send and ack of the transaction durable in one storage commit; returns how many messages were sent and acked. */
    public Committed commit() {
        TransactResponse answer = session.call(TransactRequest.newBuilder().setCommit(Commit.newBuilder().setTransactionId(id)));
        var committed = Session.expect(answer, TransactResponse.KindCase.COMMITTED).getCommitted();
        return new Committed(committed.getSent(), committed.getAcked());
    }

    /** Discards the sends; the acked messages go back to their queues as failed deliveries. */
    public void rollback() {
        TransactResponse answer = session.call(TransactRequest.newBuilder().setRollback(Rollback.newBuilder().setTransactionId(id)));
        Session.expect(answer, TransactResponse.KindCase.ROLLED_BACK);
    }

    /** What a commit applied. */
    public record Committed(int sent, int acked) {}
}
