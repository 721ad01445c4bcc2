//! Transacted sessions through the client SDK: commit and rollback of sends and
//! acks, crash atomicity, a dropped session, and the refusals of finished and
//! unknown transactions.
use std::time::Duration;

use rebound_client::{Client, Code, Consumer, Error, OutgoingMessage, RoutingType, proto};
use tokio_stream::StreamExt;

use crate::messaging::{body, receive};
use crate::support::Broker;

const IDLE: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(400);

/// Queues `in` and `out` (durable), with `m1` waiting on `in`, and a consumer of
/// `in` that has received it.
async fn setup(client: &Client) -> (Consumer, u64) {
    client
        .create_queue("in", "in", RoutingType::Anycast, true)
        .await
        .unwrap();
    client
        .create_queue("out", "out", RoutingType::Anycast, true)
        .await
        .unwrap();
    client.send(OutgoingMessage::new("in", "m1")).await.unwrap();
    let mut consumer = client.consume("in", 1).await.unwrap();
    let d = consumer.next_timeout(IDLE).await.unwrap().expect("m1");
    assert_eq!((body(&d), d.delivery_count), ("m1".to_owned(), 1));
    (consumer, d.id)
}

async fn messages(client: &Client, queue: &str) -> u64 {
    client.queue(queue).await.unwrap().messages
}

#[track_caller]
fn assert_status(err: Error, code: Code, says: &str) {
    match err {
        Error::Status {
            code: got,
            ref message,
        } if got == code && message.contains(says) => {}
        other => panic!("expected {code:?} saying {says:?}, got {other:?}"),
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn commit_publishes_the_sends_and_removes_the_acked_message_together() {
        let broker = Broker::start().await;
        let client = broker.client().await;
        let (mut consumer, m1) = setup(&client).await;

        let tx = client.session().await.unwrap().begin().await.unwrap();
        let first = tx.send(OutgoingMessage::new("out", "o1")).await.unwrap();
        let rest = tx
            .send_batch(vec![
                OutgoingMessage::new("out", "o2"),
                OutgoingMessage::new("out", "o3"),
            ])
            .await
            .unwrap();
        assert_eq!(rest.message_ids.len(), 2);
        assert!(rest.message_ids.iter().all(|&id| id > first), "ids in send order");
        assert_eq!(consumer.ack_in(&tx, &[m1]).await.unwrap(), Vec::<u64>::new());

        assert_eq!(
            messages(&client, "out").await,
            0,
            "sends are invisible before commit"
        );
        let mut out = client.consume("out", 10).await.unwrap();
        assert!(
            receive(&mut out, 1, QUIET).await.is_empty(),
            "nothing to consume before commit"
        );

        let committed = tx.commit().await.unwrap();
        assert_eq!(
            (committed.transaction_id, committed.sent, committed.acked),
            (tx.id(), 3, 1)
        );
        let got: Vec<String> = receive(&mut out, 3, IDLE).await.iter().map(body).collect();
        assert_eq!(got, ["o1", "o2", "o3"]);
        assert_eq!(messages(&client, "in").await, 0, "the acked message is gone");
        consumer.close().await.unwrap();
        let mut again = client.consume("in", 1).await.unwrap();
        assert!(
            receive(&mut again, 1, QUIET).await.is_empty(),
            "and is never redelivered"
        );
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn rollback_discards_the_sends_and_returns_the_acked_message_counted() {
        let broker = Broker::start().await;
        let client = broker.client().await;
        let (mut consumer, m1) = setup(&client).await;

        let tx = client.session().await.unwrap().begin().await.unwrap();
        tx.send_batch(vec![
            OutgoingMessage::new("out", "o1"),
            OutgoingMessage::new("out", "o2"),
        ])
        .await
        .unwrap();
        consumer.ack_in(&tx, &[m1]).await.unwrap();
        let rolled_back = tx.rollback().await.unwrap();
        assert_eq!((rolled_back.discarded, rolled_back.returned), (2, 1));

        let back = consumer.next_timeout(IDLE).await.unwrap().expect("m1 comes back");
        assert_eq!(body(&back), "m1");
        assert_eq!((back.delivery_count, back.redelivered), (2, true));
        consumer.ack(&[back.id]).await.unwrap();
        consumer.flush().await.unwrap();
        assert_eq!(messages(&client, "out").await, 0, "the sends were discarded");
        let mut out = client.consume("out", 10).await.unwrap();
        assert!(receive(&mut out, 1, QUIET).await.is_empty());
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn kill9_before_commit_leaves_none_of_the_transaction() {
        let mut broker = Broker::start().await;
        let client = broker.client().await;
        let (mut consumer, m1) = setup(&client).await;
        let session = client.session().await.unwrap();

        // A committed transaction survives the crash...
        let done = session.begin().await.unwrap();
        done.send(OutgoingMessage::new("out", "committed")).await.unwrap();
        done.commit().await.unwrap();
        // ...an open one leaves no trace, neither its sends nor its ack.
        let open = session.begin().await.unwrap();
        let sends = (0..50)
            .map(|i| OutgoingMessage::new("out", format!("open {i}")))
            .collect();
        open.send_batch(sends).await.unwrap();
        consumer.ack_in(&open, &[m1]).await.unwrap();

        broker.kill9();
        broker.restart().await;
        let client = broker.client().await;
        let mut out = client.consume("out", 100).await.unwrap();
        let got: Vec<String> = receive(&mut out, 100, QUIET).await.iter().map(body).collect();
        assert_eq!(got, ["committed"]);
        let mut input = client.consume("in", 1).await.unwrap();
        let back = input
            .next_timeout(IDLE)
            .await
            .unwrap()
            .expect("m1 is still there");
        assert_eq!(body(&back), "m1");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_that_goes_away_rolls_back_its_open_transaction() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    let (mut consumer, m1) = setup(&client).await;

    let session = client.session().await.unwrap();
    let tx = session.begin().await.unwrap();
    tx.send(OutgoingMessage::new("out", "o1")).await.unwrap();
    consumer.ack_in(&tx, &[m1]).await.unwrap();
    drop((tx, session));

    let back = consumer.next_timeout(IDLE).await.unwrap().expect("m1 comes back");
    assert_eq!(
        (body(&back), back.delivery_count, back.redelivered),
        ("m1".to_owned(), 2, true)
    );
    assert_eq!(messages(&client, "out").await, 0);
    broker
        .wait_for_log("rolled back the open transaction of a closed session")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_and_unknown_transactions_are_refused_and_nothing_is_lost() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    let (mut consumer, m1) = setup(&client).await;
    let session = client.session().await.unwrap();

    // An empty transaction commits, as in JMS.
    let empty = session.begin().await.unwrap();
    let committed = empty.commit().await.unwrap();
    assert_eq!((committed.sent, committed.acked), (0, 0));
    let id = empty.id();
    assert_status(
        empty.commit().await.unwrap_err(),
        Code::FailedPrecondition,
        &format!("transaction {id} was already committed"),
    );
    assert_status(
        empty.send(OutgoingMessage::new("out", "late")).await.unwrap_err(),
        Code::FailedPrecondition,
        "already committed",
    );

    let rolled = session.begin().await.unwrap();
    rolled.send(OutgoingMessage::new("out", "never")).await.unwrap();
    rolled.rollback().await.unwrap();
    assert_status(
        rolled.commit().await.unwrap_err(),
        Code::FailedPrecondition,
        "was already rolled back",
    );
    assert_status(
        rolled.rollback().await.unwrap_err(),
        Code::FailedPrecondition,
        "was already rolled back",
    );

    // An ack in a finished transaction is refused and leaves the delivery outstanding.
    match consumer.ack_in(&empty, &[m1]).await.unwrap_err() {
        Error::SettleRejected(why) => assert!(why.contains("already committed"), "{why}"),
        other => panic!("expected SettleRejected, got {other:?}"),
    }
    // The session and the other transactions carry on after an error.
    let good = session.begin().await.unwrap();
    consumer.ack_in(&good, &[m1]).await.unwrap();
    assert_eq!(good.commit().await.unwrap().acked, 1);
    assert_eq!(messages(&client, "in").await, 0);
    assert_eq!(
        messages(&client, "out").await,
        0,
        "the rolled-back send stayed discarded"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_transaction_ids_are_not_found() {
    let mut broker = Broker::start().await;
    let client = broker.client().await;
    let (_, _) = setup(&client).await;

    // The protocol's own answer to a commit of an id that never existed.
    let mut raw = proto::messaging_client::MessagingClient::connect(broker.url())
        .await
        .unwrap();
    let commit = proto::TransactRequest {
        request_id: 7,
        kind: Some(proto::transact_request::Kind::Commit(proto::Commit {
            transaction_id: 424_242,
        })),
    };
    let mut answers = raw
        .transact(tokio_stream::iter([commit]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.next().await.unwrap().unwrap();
    assert_eq!(answer.request_id, 7);
    match answer.kind {
        Some(proto::transact_response::Kind::Error(e)) => {
            assert_eq!(
                (Code::from_i32(e.code), e.message.as_str()),
                (Code::NotFound, "transaction 424242 not found")
            );
        }
        other => panic!("expected an error, got {other:?}"),
    }

    // Through the SDK: a transaction from before a broker restart is gone with its
    // session; the broker no longer knows its id.
    let stale = client.session().await.unwrap().begin().await.unwrap();
    broker.kill9();
    broker.restart().await;
    let client = broker.client().await;
    let mut consumer = client.consume("in", 1).await.unwrap();
    let m1 = consumer.next_timeout(IDLE).await.unwrap().expect("m1").id;
    match consumer.ack_in(&stale, &[m1]).await.unwrap_err() {
        Error::SettleRejected(why) => assert_eq!(why, format!("transaction {} not found", stale.id())),
        other => panic!("expected SettleRejected, got {other:?}"),
    }
    assert!(stale.commit().await.is_err(), "its session is gone");
    consumer.ack(&[m1]).await.unwrap();
    consumer.flush().await.unwrap();
    assert_eq!(
        messages(&client, "in").await,
        0,
        "the delivery stayed outstanding and could be acked"
    );
}
