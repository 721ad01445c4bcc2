//! What an operation would create, as the permission checks at the edge ask it:
//! it must agree with what the operation then creates; and a retry that may not
//! send some messages back.
use rebound_config::RoutingType;

use super::{broker, send};
use crate::engine::Creation;

const BOTH: Creation = Creation {
    address: true,
    queue: true,
};
const NOTHING: Creation = Creation {
    address: false,
    queue: false,
};

#[tokio::test]
async fn a_send_to_a_new_address_creates_it_and_its_queue() {
    let (broker, _) = broker(
        "[[address-settings]]\nmatch = \"noqueue.#\"\nauto-create-queues = false\n[[address-settings]]\nmatch = \"fixed.#\"\nauto-create-addresses = false\n[[address-settings]]\nmatch = \"topic.#\"\ndefault-address-routing-type = \"multicast\"\n",
    )
    .await;
    assert_eq!(broker.creation_on_send("fresh"), BOTH);
    send(&broker, "fresh", &["x"]).await;
    assert!(broker.queue("fresh").is_ok());
    assert_eq!(broker.creation_on_send("fresh"), NOTHING);

    let address_only = Creation {
        address: true,
        queue: false,
    };
    assert_eq!(broker.creation_on_send("noqueue.a"), address_only);
    assert_eq!(broker.creation_on_send("topic.a"), address_only);
    send(&broker, "noqueue.a", &["x"]).await;
    assert!(broker.management().address("noqueue.a").is_ok() && broker.queue("noqueue.a").is_err());
    // Not auto-creatable: the send fails by itself, creating nothing.
    assert_eq!(broker.creation_on_send("fixed.a"), NOTHING);
    assert_eq!(broker.creation_on_send("bad name"), NOTHING);
}

#[tokio::test]
async fn a_consumer_of_a_new_queue_creates_it_on_the_address_of_its_name() {
    let (broker, _) = broker(
        "[[address-settings]]\nmatch = \"fixed\"\nauto-create-queues = false\n\
         [[address-settings]]\nmatch = \"closed\"\nauto-create-addresses = false\n",
    )
    .await;
    broker
        .create_queue(
            "orders",
            "orders.eu",
            Some(RoutingType::Anycast),
            true,
            None,
            false,
        )
        .await
        .unwrap();
    assert_eq!(broker.consumer_plan("orders.eu"), ("orders".to_owned(), NOTHING));
    assert_eq!(broker.consumer_plan("fresh"), ("fresh".to_owned(), BOTH));
    broker
        .create_address("lonely", Some(RoutingType::Anycast))
        .await
        .unwrap();
    let queue_only = Creation {
        address: false,
        queue: true,
    };
    assert_eq!(broker.consumer_plan("lonely"), ("lonely".to_owned(), queue_only));
    assert_eq!(broker.consumer_plan("fixed"), ("fixed".to_owned(), NOTHING));
    // As a send: no address where a send may not make one.
    assert_eq!(broker.consumer_plan("closed"), ("closed".to_owned(), NOTHING));
    assert!(broker.subscribe("closed", 1, "").await.is_err());
    assert!(broker.management().address("closed").is_err());
    let sub = broker.subscribe("fresh", 1, "").await.unwrap();
    assert_eq!(sub.queue.address, "fresh");
    assert!(sub.queue.auto_created && broker.management().address("fresh").unwrap().auto_created);
    assert_eq!(broker.consumer_plan("fresh"), ("fresh".to_owned(), NOTHING));
}

#[tokio::test]
async fn a_retry_skips_the_messages_whose_way_back_is_refused() {
    let (broker, _) = broker(super::WITH_DLQ).await;
    send(&broker, "orders", &["o"]).await;
    send(&broker, "billing", &["b"]).await;
    for queue in ["orders", "billing"] {
        let mut sub = broker.subscribe(queue, 1, "").await.unwrap();
        let got = super::receive(&mut sub, 1).await;
        let dead = crate::engine::Settlement::DeadLetter { reason: "bad".into() };
        super::settle(&broker, &sub, &super::ids(&got), dead, None).await;
    }
    let dlq = crate::engine::Selection {
        queue: "DLQ".into(),
        ..Default::default()
    };
    let refuse_billing = |address: &str| match address {
        "billing" => Err("no send on billing".to_owned()),
        _ => Ok(()),
    };
    let outcomes = broker
        .management()
        .retry_messages(&dlq, false, 0, None, refuse_billing)
        .await
        .unwrap();
    let skipped: Vec<_> = outcomes.iter().filter_map(|o| o.skipped.as_deref()).collect();
    assert_eq!(skipped, ["no send on billing"]);
    assert_eq!(
        broker.management().count_messages(&dlq).unwrap(),
        1,
        "the refused one stays"
    );
    assert_eq!(broker.queue("orders").unwrap().snapshot().messages, 1);
}
