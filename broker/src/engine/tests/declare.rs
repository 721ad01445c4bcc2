//! Applying a config: all or nothing, and creating what exists.
use rebound_config::RoutingType;

use super::{Broker, WITH_DLQ, broker, config, open};
use crate::error::BrokerError;

fn attempts(broker: &Broker) -> Option<u32> {
    broker.settings_for("orders").max_delivery_attempts
}

#[tokio::test]
async fn a_config_that_contradicts_what_exists_changes_nothing() {
    let (broker, store) = broker(WITH_DLQ).await;
    broker
        .create_queue("a", "taken", Some(RoutingType::Anycast), true, None, false)
        .await
        .unwrap();
    let conflicting = format!(
        "{}\n[[addresses]]\nname = \"b\"\n  [[addresses.queues]]\n  name = \"fresh\"\n  [[addresses.queues]]\n  name = \"taken\"\n",
        WITH_DLQ.replace("max-delivery-attempts = 3", "max-delivery-attempts = 2")
    );
    let err = broker.reload(&config(&conflicting)).await.unwrap_err();
    assert!(matches!(err, BrokerError::QueueExists { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "queue 'taken' already exists with address 'a', not 'b'"
    );
    assert_eq!(attempts(&broker), Some(3), "the settings in force stay");
    assert!(broker.queue("fresh").is_err(), "nothing declared was created");
    assert!(
        broker
            .create_address("b", Some(RoutingType::Anycast))
            .await
            .unwrap()
    );

    // The same config again is a no-op; at start-up a contradiction is refused too.
    broker.reload(&config(WITH_DLQ)).await.unwrap();
    broker.close().await.unwrap();
    let refused = Broker::open(&config(&conflicting), store.clone()).await;
    assert!(matches!(refused, Err(BrokerError::QueueExists { .. })));
    open(WITH_DLQ, store).await;
}

#[tokio::test]
async fn creating_an_address_is_idempotent_only_as_asked() {
    let (broker, _) = broker(WITH_DLQ).await;
    assert!(
        broker
            .create_address("mc", Some(RoutingType::Anycast))
            .await
            .unwrap()
    );
    assert!(
        !broker
            .create_address("mc", Some(RoutingType::Anycast))
            .await
            .unwrap()
    );
    assert!(!broker.create_address("mc", None).await.unwrap());
    let err = broker
        .create_address("mc", Some(RoutingType::Multicast))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "address 'mc' already exists with routing type anycast, not multicast"
    );
    // A multicast queue makes it carry both, so both are then as asked.
    broker
        .create_queue("mc", "sub", Some(RoutingType::Multicast), true, None, false)
        .await
        .unwrap();
    assert!(
        !broker
            .create_address("mc", Some(RoutingType::Multicast))
            .await
            .unwrap()
    );
}
