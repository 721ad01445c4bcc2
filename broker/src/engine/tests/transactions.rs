//! Local transactions: sends invisible until commit, acks undone by a rollback,
//! refused transactional settles that leave credit alone.
use std::time::Duration;

use super::*;

#[tokio::test]
async fn sends_are_visible_only_after_the_commit() {
    let (broker, _store) = broker("").await;
    broker
        .create_queue("q", "q", None, true, None, false)
        .await
        .unwrap();
    let tx = broker.begin_transaction(1).unwrap();
    broker
        .send_in_transaction(tx, 1, vec![message("q", "a"), message("q", "b")])
        .unwrap();
    assert_eq!(broker.queue("q").unwrap().snapshot().messages, 0);
    let outcome = broker.commit_transaction(tx, 1).await.unwrap();
    assert_eq!((outcome.sends, outcome.acks), (2, 0));
    assert_eq!(broker.queue("q").unwrap().snapshot().messages, 2);
}

#[tokio::test]
async fn a_rolled_back_ack_is_a_failed_delivery() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "q", &["m"]).await;
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let tx = broker.begin_transaction(7).unwrap();
    settle(&broker, &sub, &ids(&got), Settlement::Ack, Some(tx)).await;
    broker.rollback_transaction(tx, 7).await.unwrap();
    let back = receive(&mut sub, 1).await;
    assert_eq!(back[0].delivery_count, 2);
}

#[tokio::test]
async fn a_refused_settle_leaves_its_deliveries_outstanding_and_the_credit_alone() {
    // Link credit: only deliveries use it. A consumer with credit 1 whose
    // transactional ack is refused, then acks plainly and grants one credit per
    // settled delivery, must get the next message.
    let (broker, _store) = broker("").await;
    send(&broker, "q", &["1", "2"]).await;
    let mut sub = broker.subscribe("q", 1, "").await.unwrap();
    let first = receive(&mut sub, 1).await;
    let refused = settle(&broker, &sub, &ids(&first), Settlement::Ack, Some(424242)).await;
    assert!(
        matches!(refused, Settled::Refused { ref delivery_ids, .. } if *delivery_ids == ids(&first)),
        "{refused:?}"
    );
    assert_eq!(sub.queue.snapshot().delivering, 1, "still outstanding");
    let done = settle(&broker, &sub, &ids(&first), Settlement::Ack, None).await;
    assert!(matches!(done, Settled::Done { ref settled, .. } if settled.len() == 1));
    sub.queue.grant(sub.consumer, 1, u32::MAX);
    assert!(
        !nothing_within(&mut sub, Duration::from_secs(2)).await,
        "the next message came"
    );
}

#[tokio::test]
async fn only_an_ack_may_be_transactional() {
    let (broker, _store) = broker("").await;
    send(&broker, "q", &["m"]).await;
    let mut sub = broker.subscribe("q", 1, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let tx = broker.begin_transaction(1).unwrap();
    let err = broker
        .settle_deliveries(
            &sub.queue,
            sub.consumer,
            ids(&got),
            Settlement::Release,
            Some(Joins::Here(tx)),
            |_| {},
        )
        .unwrap_err();
    assert!(err.to_string().contains("only an ACK"), "{err}");
    assert_eq!(sub.queue.snapshot().delivering, 1);
}
