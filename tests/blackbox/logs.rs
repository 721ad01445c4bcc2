//! The log as a collector reads it: under `--log-format json` every line of a
//! whole run, fatal start-up errors included, is one JSON object with unique
//! keys; dead letters say where they came from and after how many
//! deliveries, and a retry of many dead letters is one line.
use std::collections::HashSet;
use std::fmt;
use std::process::Command;

use rebound_client::{OutgoingMessage, Selection};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::console::POISON_CONFIG;
use crate::redelivery::next;
use crate::support::{Broker, REBOUND};

/// A JSON value whose objects have no key twice (serde_json keeps the last
/// of a repeated key without a word).
struct Strict;

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !keys.insert(key.clone()) {
                return Err(de::Error::custom(format!("the key {key:?} twice")));
            }
            map.next_value::<Strict>()?;
        }
        Ok(Strict)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        while seq.next_element::<Strict>()?.is_some() {}
        Ok(Strict)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_str<E>(self, _: &str) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict)
    }
}

/// Every line of `log`, parsed strictly: one JSON object each, no key twice.
fn strict_lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|line| {
            serde_json::from_str::<Strict>(line).unwrap_or_else(|e| panic!("not strict JSON ({e}): {line}"));
            serde_json::from_str(line).unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_line_of_a_json_log_is_an_object_with_unique_keys() {
    let mut broker = Broker::start_custom(POISON_CONFIG, "127.0.0.1:0", &["--log-format", "json"]).await;
    let client = broker.client().await;
    const MESSAGES: usize = 200;
    for i in 0..MESSAGES {
        client
            .send(OutgoingMessage::new("orders", format!("m{i}")))
            .await
            .unwrap();
    }
    let mut consumer = client.consume("orders", 100).await.unwrap();
    for _ in 0..2 * MESSAGES {
        let d = next(&mut consumer).await;
        consumer.nack(&[d.id], "gateway timeout").await.unwrap();
    }
    consumer.close().await.unwrap();
    let dlq = "DLQ.orders";
    for _ in 0..100 {
        if client.queue(dlq).await.unwrap().messages == MESSAGES as u64 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let retried = client
        .retry_messages(&Selection::new(dlq), false, 0)
        .await
        .unwrap();
    assert_eq!(retried.moved, MESSAGES as u64);
    broker.wait_for_log("management operation").await;
    broker.terminate().await;

    let events = strict_lines(&broker.log());
    let dead: Vec<&Value> = events.iter().filter(|e| e["to"] == "DLA").collect();
    assert_eq!(dead.len(), MESSAGES, "one line a dead letter");
    for event in &dead {
        assert_eq!(event["address"], "orders", "{event}");
        assert_eq!(event["queue"], "orders", "{event}");
        assert_eq!(event["delivery_count"], 2, "{event}");
        assert!(event["message_id"].is_u64(), "{event}");
    }
    let retries: Vec<&Value> = events.iter().filter(|e| e["from"] == dlq).collect();
    assert_eq!(retries.len(), 1, "one line for the whole retry: {retries:?}");
    assert_eq!(retries[0]["retried"], MESSAGES as u64, "{}", retries[0]);
    let audit = events
        .iter()
        .find(|e| e["target"] == "rebound::audit")
        .expect("the retry's audit line");
    assert_eq!(audit["user"], "anonymous", "{audit}");
    assert_eq!(audit["result"], "ok", "{audit}");
}

#[tokio::test]
async fn a_fatal_start_up_error_is_a_json_line_too() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rebound.toml");
    std::fs::write(&config, "[[addresses]]\nnmae = \"orders\"\n").unwrap();
    let out = Command::new(REBOUND)
        .args(["serve", "--log-format", "json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let events = strict_lines(&stderr);
    let fatal = events.last().expect("a line");
    assert_eq!(fatal["level"], "ERROR", "{fatal}");
    assert!(
        fatal["error"].as_str().is_some_and(|e| e.contains("nmae")),
        "{fatal}"
    );
}
