//! A broker on PostgreSQL whose database goes away and comes back: sends fail
//! with UNAVAILABLE (never acknowledged without being stored) and work again
//! without a restart. (The messaging, redelivery, transaction and operations
//! tests run on PostgreSQL too, through `also_on_postgres!`.)
use std::time::{Duration, Instant};

use rebound_client::{Code, OutgoingMessage, RoutingType};

use crate::support::Broker;
use crate::support::pg::{DatabaseProxy, TestSchema};

#[tokio::test(flavor = "multi_thread")]
async fn sends_fail_unavailable_while_the_database_is_away_and_work_again_once_it_is_back() {
    let Some(schema) = TestSchema::create("black-box PostgreSQL outage") else {
        return;
    };
    let mut proxy = DatabaseProxy::start(&schema).await;
    let broker = Broker::start_custom(
        "",
        "127.0.0.1:0",
        &["--storage", "postgres", "--postgres-url", proxy.url()],
    )
    .await;
    let client = broker.client().await;
    client
        .create_queue("orders", "orders", RoutingType::Anycast, true)
        .await
        .unwrap();
    client
        .send(OutgoingMessage::new("orders", "before"))
        .await
        .unwrap();

    proxy.cut().await;
    let err = client
        .send(OutgoingMessage::new("orders", "while away"))
        .await
        .expect_err("nothing is acknowledged while the database is away");
    assert_eq!(err.code(), Some(Code::Unavailable), "{err}");
    assert!(err.to_string().contains("the database is unavailable"), "{err}");

    proxy.resume().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.send(OutgoingMessage::new("orders", "after")).await {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline && e.code() == Some(Code::Unavailable) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("sends still fail once the database is back: {e}"),
        }
    }
    let mut consumer = client.consume("orders", 10).await.unwrap();
    let mut bodies = Vec::new();
    while let Some(d) = consumer.next_timeout(Duration::from_secs(2)).await.unwrap() {
        bodies.push(String::from_utf8_lossy(&d.message.body).into_owned());
        consumer.ack(&[d.id]).await.unwrap();
    }
    assert_eq!(bodies, ["before", "after"]);
}
