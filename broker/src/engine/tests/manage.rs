//! Management by selection: a selection of ids takes exactly those messages, and
//! one message is found by its id whatever its state; dead letters moved elsewhere
//! are retried to where they first failed.
use super::*;
use crate::engine::Selection;
use crate::error::BrokerError;

#[tokio::test]
async fn a_selection_of_ids_takes_exactly_those_messages() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "orders", &["a", "b", "c", "d"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 4).await;
    let dead = Settlement::DeadLetter { reason: "bad".into() };
    settle(&broker, &sub, &ids(&got), dead, None).await;
    let dlq: Vec<u64> = broker
        .management()
        .browse("DLQ", "", 10)
        .unwrap()
        .iter()
        .map(|b| b.entry.id)
        .collect();
    assert_eq!(dlq.len(), 4);

    let two = Selection {
        queue: "DLQ".into(),
        message_ids: [dlq[1], dlq[3]].into(),
        ..Default::default()
    };
    assert_eq!(broker.management().count_messages(&two).unwrap(), 2);
    let preview = broker
        .management()
        .retry_messages(&two, true, 0, None, |_| Ok(()))
        .await
        .unwrap();
    let previewed: Vec<u64> = preview.iter().map(|o| o.message_id).collect();
    assert_eq!(previewed, [dlq[1], dlq[3]]);
    assert_eq!(
        broker.management().browse("DLQ", "", 10).unwrap().len(),
        4,
        "a dry run moves nothing"
    );
    let done = broker
        .management()
        .retry_messages(&two, false, 0, None, |_| Ok(()))
        .await
        .unwrap();
    assert!(done.iter().all(|o| o.skipped.is_none() && o.to_queue == "orders"));
    let back: Vec<String> = receive(&mut sub, 2)
        .await
        .iter()
        .map(|d| body(d).to_owned())
        .collect();
    assert_eq!(back, ["b", "d"]);

    // With a filter as well, the ids it does not match stay.
    let filtered = Selection {
        filter: "_AMQ_ORIG_QUEUE = 'elsewhere'".into(),
        message_ids: [dlq[0]].into(),
        ..two
    };
    assert_eq!(broker.management().remove_messages(&filtered).await.unwrap(), 0);
    assert_eq!(broker.management().browse("DLQ", "", 10).unwrap().len(), 2);
}

#[tokio::test]
async fn one_message_is_found_by_id_in_any_state() {
    let (broker, _store) = broker(WITH_DLQ).await;
    let sent = send(&broker, "orders", &["a", "b"]).await;
    let mut sub = broker.subscribe("orders", 1, "").await.unwrap();
    receive(&mut sub, 1).await;
    let delivering = broker.management().message("orders", sent[0]).unwrap();
    assert_eq!(delivering.state, crate::queue::BrowseState::Delivering);
    assert_eq!(&delivering.record.body[..], b"a");
    assert_eq!(
        broker.management().message("orders", sent[1]).unwrap().state,
        crate::queue::BrowseState::Ready
    );
    assert!(matches!(
        broker.management().message("orders", 999_999),
        Err(BrokerError::MessageNotFound { id: 999_999, .. })
    ));
}

#[tokio::test]
async fn dead_letters_moved_to_a_parking_address_retry_to_their_first_queue() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "orders", &["a"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let dead = Settlement::DeadLetter { reason: "bad".into() };
    settle(&broker, &sub, &ids(&got), dead, None).await;
    let dlq = Selection {
        queue: "DLQ".into(),
        ..Default::default()
    };
    assert_eq!(
        broker.management().move_messages(&dlq, "parked").await.unwrap(),
        1
    );
    let parked = Selection {
        queue: "parked".into(),
        ..Default::default()
    };
    let done = broker
        .management()
        .retry_messages(&parked, false, 0, None, |_| Ok(()))
        .await
        .unwrap();
    assert_eq!(
        (done[0].to_address.as_str(), done[0].to_queue.as_str()),
        ("orders", "orders")
    );
    assert_eq!(body(&receive(&mut sub, 1).await[0]), "a");
}
