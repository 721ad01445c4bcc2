//! Random text where clients put names, properties, selectors and reasons: every
//! operation either works or answers with a typed error that is a client's
//! (never `INTERNAL`) and short enough for a gRPC header, and no message already
//! stored goes missing.
use proptest::prelude::*;
use tonic::{Code, Status};

use super::*;
use crate::engine::Selection;
use crate::error::BrokerError;

/// Text as clients send it: anything (random bytes, read leniently: the gRPC edge
/// refuses what is not UTF-8), plausible names and selectors, very long runs, and
/// deep nesting. Never `kept`, the queue whose messages the test watches.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        "[a-z._#*$'() =<>-]{0,24}",
        (any::<char>(), 0usize..200_000).prop_map(|(c, n)| c.to_string().repeat(n)),
        (0usize..20_000).prop_map(|n| format!("{}a = 1", "(".repeat(n))),
    ]
    .prop_filter("not kept", |t| t != "kept")
}

/// A queue a management operation may take messages from.
fn source() -> impl Strategy<Value = String> {
    prop_oneof![text(), Just("work".to_owned()), Just("DLQ".to_owned())]
}

#[derive(Debug, Clone)]
enum Call {
    Send {
        address: String,
        property: String,
        value: String,
        body: usize,
    },
    Subscribe {
        queue: String,
        filter: String,
    },
    Browse {
        queue: String,
        filter: String,
    },
    Nack(String),
    DeadLetter(String),
    Move {
        queue: String,
        filter: String,
        to: String,
    },
    Retry {
        queue: String,
        filter: String,
    },
}

fn call() -> impl Strategy<Value = Call> {
    let body = prop::sample::select(vec![0, 10, 1 << 20, (1 << 20) + 1]);
    prop_oneof![
        (text(), text(), text(), body).prop_map(|(address, property, value, body)| Call::Send {
            address,
            property,
            value,
            body
        }),
        (text(), text()).prop_map(|(queue, filter)| Call::Subscribe { queue, filter }),
        (text(), text()).prop_map(|(queue, filter)| Call::Browse { queue, filter }),
        text().prop_map(Call::Nack),
        text().prop_map(Call::DeadLetter),
        (source(), text(), text()).prop_map(|(queue, filter, to)| Call::Move { queue, filter, to }),
        (source(), text()).prop_map(|(queue, filter)| Call::Retry { queue, filter }),
    ]
}

/// An error a client can act on: not INTERNAL, and a message that fits a header.
fn clear<T>(result: Result<T, BrokerError>) -> Result<Option<T>, TestCaseError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(err) => {
            let status = Status::from(err);
            prop_assert_ne!(status.code(), Code::Internal, "{}", status.message());
            // An excerpt of 100 bytes may grow to 600 when control characters are
            // escaped; gRPC's header limits are 8 KiB and more.
            prop_assert!(status.message().len() <= 2048, "{} bytes", status.message().len());
            Ok(None)
        }
    }
}

/// Runs `calls` against a broker holding messages on `kept` and `work`; checks
/// every answer, then that `kept` is intact and no message was lost anywhere.
async fn run(calls: Vec<Call>) -> Result<(), TestCaseError> {
    let (broker, store) = super::broker(WITH_DLQ).await;
    let kept = send(&broker, "kept", &["a", "b", "c"]).await;
    let mut sent = kept.len() + send(&broker, "work", &["w"]).await.len();
    let mut work = broker.subscribe("work", 1000, "").await.unwrap();
    for call in calls {
        match call {
            Call::Send {
                address,
                property,
                value,
                body,
            } => {
                let mut m = message(&address, "");
                m.body = vec![7u8; body].into();
                let value = rebound_storage::PropertyValue {
                    value: Some(rebound_storage::records::property_value::Value::String(value)),
                };
                m.properties.insert(property, value);
                if let Some(s) = clear(broker.send(vec![m]).await)? {
                    sent += s.ids.len() - s.unrouted as usize;
                }
            }
            Call::Subscribe { queue, filter } => {
                if let Some(sub) = clear(broker.subscribe(&queue, 10, &filter).await)? {
                    broker.consumer_gone(&sub.queue, sub.consumer).await;
                }
            }
            Call::Browse { queue, filter } => {
                clear(broker.management().browse(&queue, &filter, 10))?;
            }
            Call::Nack(reason) => {
                sent += send(&broker, "work", &["w"]).await.len();
                let got = receive(&mut work, 1).await;
                let how = Settlement::Nack {
                    reason,
                    retry_after_ms: None,
                    pause_queue_ms: None,
                };
                settle(&broker, &work, &ids(&got), how, None).await;
            }
            Call::DeadLetter(reason) => {
                sent += send(&broker, "work", &["w"]).await.len();
                let got = receive(&mut work, 1).await;
                settle(
                    &broker,
                    &work,
                    &ids(&got),
                    Settlement::DeadLetter { reason },
                    None,
                )
                .await;
            }
            Call::Move { queue, filter, to } => {
                let selection = Selection {
                    queue,
                    filter,
                    message_ids: Default::default(),
                };
                clear(broker.management().move_messages(&selection, &to).await)?;
            }
            Call::Retry { queue, filter } => {
                let selection = Selection {
                    queue,
                    filter,
                    message_ids: Default::default(),
                };
                clear(
                    broker
                        .management()
                        .retry_messages(&selection, false, 0, None, |_| Ok(()))
                        .await,
                )?;
            }
        }
    }
    let still: Vec<u64> = broker
        .management()
        .browse("kept", "", 10)
        .unwrap()
        .iter()
        .map(|b| b.entry.id)
        .collect();
    prop_assert_eq!(&still, &kept);
    let queue = broker.queue("kept").unwrap();
    for id in kept {
        prop_assert!(store.read_message(queue.id, id).unwrap().is_some());
    }
    // Nothing is acked, expired or dropped here: every message sent is in a queue.
    let held: u64 = broker.read().queues.values().map(|q| q.snapshot().messages).sum();
    prop_assert_eq!(held, sent as u64);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_input_gets_a_clear_answer_and_loses_nothing(calls in prop::collection::vec(call(), 1..6)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(run(calls))?;
    }
}
