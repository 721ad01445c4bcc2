//! A node of a cluster keeps the database's time, not its own wall clock: a
//! node whose clock runs two minutes ahead (libfaketime; its monotonic clock
//! stays true, as under a stepped NTP clock) still delivers a scheduled
//! message at its time, not at once.
use std::path::Path;
use std::time::{Duration, Instant};

use rebound_client::{OutgoingMessage, RoutingType};

use crate::cluster::{body, consume_served, start_node_with_env};
use crate::scheduled::now_ms;
use crate::support::pg::TestSchema;
use crate::support::skipped;

/// Where Debian's libfaketime keeps its multithreaded variant.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

#[tokio::test(flavor = "multi_thread")]
async fn a_node_whose_clock_runs_ahead_delivers_scheduled_messages_at_their_time() {
    if !Path::new(LIBFAKETIME).exists() {
        return skipped(&format!("no {LIBFAKETIME} (apt-get install libfaketime)"));
    }
    let Some(schema) = TestSchema::create("cluster clock") else {
        return;
    };
    let url = schema.url();
    let env = [
        ("LD_PRELOAD", LIBFAKETIME),
        ("FAKETIME", "+120s"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ];
    let node = start_node_with_env(0, "", &url, &env).await;
    let client = node.client().await;
    client
        .create_queue("jobs", "jobs", RoutingType::Anycast, true)
        .await
        .unwrap();
    // The node takes the new queue's lease first.
    let mut consumer = consume_served(&node, "jobs", Duration::from_secs(10)).await;

    let sent = Instant::now();
    let due = now_ms() + 3000;
    client
        .send(OutgoingMessage::new("jobs", "later").deliver_at_ms(due))
        .await
        .unwrap();
    let delivered = consumer
        .next_timeout(Duration::from_secs(20))
        .await
        .unwrap()
        .expect("delivered within 20 s");
    let after = sent.elapsed();
    assert_eq!(body(&delivered), "later");
    assert!(
        after >= Duration::from_millis(2500),
        "delivered {after:?} after it was sent for 3 s later: the node went by its own clock, two minutes ahead"
    );
}
