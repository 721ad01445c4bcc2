//! The web console's JSON API, as the page (or a script) uses it: overview, queues,
//! browsing, dead-letter groups, retry with a preview then a confirm, move, remove,
//! and clear 4xx answers to bad requests.
use std::time::Duration;

use rebound_client::{Client, OutgoingMessage, RoutingType};
use serde_json::{Value, json};

use crate::messaging::{body, receive};
use crate::redelivery::next;
use crate::support::{Broker, http_get, http_post_json};

/// Two failed deliveries dead-letter a message to `DLQ.<address>` on `DLA`.
pub const POISON_CONFIG: &str = r##"
[[address-settings]]
match = "#"
max-delivery-attempts = 2
dead-letter-address = "DLA"
auto-create-dead-letter-resources = true
"##;

/// Sends `bodies` to `address` and fails each delivery of them with `reason` until
/// they are dead letters.
pub async fn poison(client: &Client, address: &str, bodies: &[&str], reason: &str) {
    for b in bodies {
        client
            .send(OutgoingMessage::new(address, b.to_string()))
            .await
            .unwrap();
    }
    let mut consumer = client.consume(address, 10).await.unwrap();
    for _ in 0..2 * bodies.len() {
        let d = next(&mut consumer).await;
        consumer.nack(&[d.id], reason).await.unwrap();
    }
    consumer.close().await.unwrap();
    let dlq = format!("DLQ.{address}");
    for _ in 0..100 {
        if client
            .queue(&dlq)
            .await
            .is_ok_and(|q| q.messages >= bodies.len() as u64)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the messages never reached {dlq}");
}

async fn get(broker: &Broker, path: &str) -> (u16, Value) {
    let (status, text) = http_get(&format!("{}{path}", broker.http_url().await)).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}")),
    )
}

async fn post(broker: &Broker, path: &str, body: Value) -> (u16, Value) {
    let (status, text) = http_post_json(&format!("{}{path}", broker.http_url().await), &body).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}")),
    )
}

/// A message id as the API gives it: a string of decimal digits (a JSON number
/// would not reach a browser's JavaScript exactly).
fn id(v: &Value) -> u64 {
    v.as_str()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("{v} is not a message id as a string of digits"))
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(id).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn overview_and_queues_table_show_the_broker() {
    let broker = Broker::start_with_config(POISON_CONFIG).await;
    let client = broker.client().await;
    poison(&client, "orders", &["bad"], "db down").await;
    client.send(OutgoingMessage::new("orders", "fine")).await.unwrap();

    let (status, o) = get(&broker, "/api/overview").await;
    assert_eq!(status, 200, "{o}");
    assert_eq!(o["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(o["listen"]["grpc"], broker.addr().to_string());
    assert_eq!(o["gauges"]["messages"], 2, "{o}");
    assert_eq!(o["connections"], 1, "{o}");
    assert!(o["store"]["commits"].as_u64().unwrap() > 0, "{o}");
    assert!(o["rates"].is_array(), "{o}");

    let (status, q) = get(&broker, "/api/queues").await;
    assert_eq!(status, 200);
    let queues = q["queues"].as_array().unwrap();
    let find = |name: &str| {
        queues
            .iter()
            .find(|q| q["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {q}"))
    };
    let orders = find("orders");
    assert_eq!(orders["messages"], 1);
    assert_eq!(orders["dead_lettered"], 1);
    assert_eq!(orders["redelivered"], 1);
    assert_eq!(orders["routing_type"], "anycast");
    assert_eq!(orders["settings_matches"], json!(["#"]));
    assert_eq!(orders["dead_letter_queue"], false);
    let dlq = find("DLQ.orders");
    assert_eq!(dlq["address"], "DLA");
    assert_eq!(dlq["dead_letter_queue"], true);
    assert_eq!(dlq["filter"], "_AMQ_ORIG_ADDRESS = 'orders'");

    let (status, page) = http_get(&format!("{}/", broker.http_url().await)).await;
    assert_eq!(status, 200);
    assert!(page.contains("/assets/console.js"), "{page}");
    let (status, js) = http_get(&format!("{}/assets/console.js", broker.http_url().await)).await;
    assert_eq!(status, 200);
    assert!(
        !js.contains("innerHTML"),
        "broker data must reach the page as text only"
    );
}

/// The names of a page of the queues table.
fn names(page: &Value) -> Vec<&str> {
    page["queues"]
        .as_array()
        .unwrap_or_else(|| panic!("a page of queues: {page}"))
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_broker_sorts_filters_and_pages_the_queues_table() {
    let broker = Broker::start_with_config(POISON_CONFIG).await;
    let client = broker.client().await;
    poison(&client, "c.five", &["bad"], "db down").await;
    for (name, count) in [("a.one", 1), ("a.two", 2), ("b.three", 2), ("b.four", 3)] {
        for n in 0..count {
            client
                .send(OutgoingMessage::new(name, format!("{n}")))
                .await
                .unwrap();
        }
    }

    // Sorted by name by default, a page at a time; tokens lead on and back.
    let (status, first) = get(&broker, "/api/queues?limit=2").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(names(&first), ["DLQ.c.five", "a.one"]);
    assert_eq!(
        (first["total"].as_u64(), first["shown"].as_u64()),
        (Some(6), Some(6))
    );
    assert_eq!(first["prev_page_token"], Value::Null);
    let token = first["next_page_token"].as_str().expect("a next page").to_owned();
    let (_, second) = get(&broker, &format!("/api/queues?limit=2&page_token={token}")).await;
    assert_eq!(names(&second), ["a.two", "b.four"]);
    let back = second["prev_page_token"]
        .as_str()
        .expect("a previous page")
        .to_owned();
    let (_, again) = get(&broker, &format!("/api/queues?limit=2&page_token={back}")).await;
    assert_eq!(names(&again), names(&first));
    let (_, last) = get(&broker, "/api/queues?limit=2&page_token=4").await;
    assert_eq!(
        (names(&last), &last["next_page_token"]),
        (vec!["b.three", "c.five"], &Value::Null)
    );

    // Sorted by a figure, either way, ties by name; filtered on name or address.
    let (_, fullest) = get(&broker, "/api/queues?sort=messages&dir=desc&limit=3").await;
    assert_eq!(names(&fullest), ["b.four", "a.two", "b.three"]);
    let (_, emptiest) = get(&broker, "/api/queues?sort=messages&limit=3").await;
    assert_eq!(names(&emptiest), ["c.five", "DLQ.c.five", "a.one"]);
    let (_, filtered) = get(&broker, "/api/queues?filter=B.&sort=name&dir=desc").await;
    assert_eq!(names(&filtered), ["b.three", "b.four"]);
    assert_eq!(
        (filtered["total"].as_u64(), filtered["shown"].as_u64()),
        (Some(2), Some(6))
    );
    let (_, on_dla) = get(&broker, "/api/queues?filter=dla").await;
    assert_eq!(names(&on_dla), ["DLQ.c.five"]);
    let (_, dead) = get(&broker, "/api/queues?dead_letters=true").await;
    assert_eq!(names(&dead), ["DLQ.c.five"]);

    // The overview names the dead-letter queues that hold messages.
    let (_, o) = get(&broker, "/api/overview").await;
    assert_eq!(o["dead_letters_waiting"]["count"], 1, "{o}");
    assert_eq!(
        o["dead_letters_waiting"]["queues"][0]["name"], "DLQ.c.five",
        "{o}"
    );
    assert_eq!(o["dead_letters_waiting"]["queues"][0]["messages"], 1, "{o}");

    for (path, why) in [
        ("/api/queues?page_token=x", "page_token"),
        ("/api/queues?limit=0", "limit 0"),
        ("/api/queues?limit=501", "limit 501"),
        ("/api/queues?sort=colour", "colour"),
    ] {
        let (status, v) = get(&broker, path).await;
        assert_eq!(status, 400, "{path}: {v}");
        assert!(v["error"].as_str().unwrap().contains(why), "{path}: {v}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queue_is_browsed_page_by_page_with_its_settings() {
    let broker = Broker::start_with_config(POISON_CONFIG).await;
    let client = broker.client().await;
    for i in 0..3 {
        client
            .send(OutgoingMessage::new("orders", format!("order {i}")).property("n", i as i64))
            .await
            .unwrap();
    }
    client
        .send(OutgoingMessage::new("orders", vec![0xffu8, 0x00, 0x41]))
        .await
        .unwrap();

    let (status, q) = get(&broker, "/api/queues/orders").await;
    assert_eq!(status, 200, "{q}");
    assert_eq!(q["messages"], 4);
    let attempts = q["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "max-delivery-attempts")
        .unwrap();
    assert_eq!(
        (&attempts["value"], &attempts["source"]),
        (&json!("2"), &json!("match \"#\""))
    );

    let (_, first) = get(&broker, "/api/queues/orders/messages?limit=2").await;
    let messages = first["messages"].as_array().unwrap();
    assert_eq!((messages.len(), &first["more"]), (2, &json!(true)), "{first}");
    assert_eq!(messages[0]["body_preview"], "order 0");
    assert_eq!(messages[0]["body_encoding"], "text");
    assert_eq!(messages[0]["state"], "ready");
    assert_eq!(
        messages[0]["properties"]["n"],
        json!({"type": "int", "value": "0"})
    );
    let (_, second) = get(&broker, "/api/queues/orders/messages?offset=2&limit=2").await;
    let messages = second["messages"].as_array().unwrap();
    assert_eq!((messages.len(), &second["more"]), (2, &json!(false)), "{second}");
    assert_eq!(messages[1]["body_encoding"], "hex");
    assert_eq!(messages[1]["body_preview"], "ff 00 41");

    let (_, filtered) = get(&broker, "/api/queues/orders/messages?filter=n%20%3E%201").await;
    assert_eq!(filtered["messages"].as_array().unwrap().len(), 1, "{filtered}");

    let id = id(&messages[0]["id"]);
    let (status, one) = get(&broker, &format!("/api/queues/orders/messages/{id}")).await;
    assert_eq!((status, &one["body_preview"]), (200, &json!("order 2")));

    // A message being retried shows the failures its queue keeps for it.
    let mut consumer = client.consume("orders", 1).await.unwrap();
    let d = next(&mut consumer).await;
    consumer.nack(&[d.id], "flaky downstream").await.unwrap();
    let path = format!("/api/queues/orders/messages/{}", d.message.message_id);
    let mut retried = get(&broker, &path).await.1;
    for _ in 0..100 {
        if retried["failures"][0].is_object() {
            break;
        }
        // The nack is settled after the call returns: look again.
        tokio::time::sleep(Duration::from_millis(50)).await;
        retried = get(&broker, &path).await.1;
    }
    assert_eq!(retried["failures"][0]["reason"], "flaky downstream", "{retried}");
    assert_eq!(retried["dead_letter_reason"], Value::Null);

    let (status, plan) = get(&broker, "/api/addresses/orders/redelivery").await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["plan"]["deliveries"].as_array().unwrap().len(), 2);
    assert_eq!(
        plan["plan"]["end"],
        json!({"kind": "dead-letter", "after": 2, "address": "DLA", "queue": "DLQ.orders"})
    );
}

also_on_postgres! {
    /// Also on PostgreSQL (`::on_postgres`), whose message ids are past 2^53.
    #[tokio::test(flavor = "multi_thread")]
    async fn dead_letters_are_grouped_and_a_previewed_retry_puts_them_back() {
        let broker = Broker::start_with_config(POISON_CONFIG).await;
        let client = broker.client().await;
        poison(&client, "orders", &["a", "b"], "db down").await;
        poison(&client, "orders", &["c"], "bad json").await;

        let (status, dl) = get(&broker, "/api/queues/DLQ.orders/dead-letters").await;
        assert_eq!(status, 200, "{dl}");
        assert_eq!((&dl["total"], &dl["grouped"]), (&json!(3), &json!(3)));
        let groups = dl["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 2, "{dl}");
        let db = &groups[0];
        assert_eq!(
            (
                &db["orig_queue"],
                &db["reason"],
                &db["last_failure"],
                &db["count"]
            ),
            (
                &json!("orders"),
                &json!("max-delivery-attempts"),
                &json!("db down"),
                &json!(2)
            )
        );
        assert!(db["first_seen_ms"].as_u64().unwrap() <= db["last_seen_ms"].as_u64().unwrap());
        assert_eq!(groups[1]["last_failure"], "bad json");
        let group_ids = ids(&db["message_ids"]);

        // One message's failure history.
        let (_, one) = get(
            &broker,
            &format!("/api/queues/DLQ.orders/messages/{}", group_ids[0]),
        )
        .await;
        let failures = one["failures"].as_array().unwrap();
        assert_eq!(failures.len(), 2, "{one}");
        assert_eq!(failures[1]["reason"], "db down");
        assert_eq!(one["origin"], json!({"address": "orders", "queue": "orders"}));

        // The preview moves nothing and says where each message goes. (Ids as
        // numbers, as scripts wrote them before ids were strings, are still read.)
        let (status, preview) = post(
            &broker,
            "/api/queues/DLQ.orders/retry",
            json!({"ids": group_ids, "dry_run": true}),
        )
        .await;
        assert_eq!(status, 200, "{preview}");
        assert_eq!(
            (&preview["would_move"], &preview["moved"]),
            (&json!(2), &json!(0))
        );
        for outcome in preview["outcomes"].as_array().unwrap() {
            assert_eq!(
                (&outcome["to_queue"], &outcome["skipped"]),
                (&json!("orders"), &Value::Null)
            );
        }
        assert_eq!(client.queue("DLQ.orders").await.unwrap().messages, 3);

        // Confirming exactly the previewed ids moves those, and only those.
        let previewed: Vec<&Value> = preview["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| &o["id"])
            .collect();
        assert_eq!(previewed.iter().copied().map(id).collect::<Vec<_>>(), group_ids);
        let (status, done) = post(&broker, "/api/queues/DLQ.orders/retry", json!({"ids": previewed})).await;
        assert_eq!((status, &done["moved"]), (200, &json!(2)), "{done}");
        let dlq = client.queue("DLQ.orders").await.unwrap();
        assert_eq!(
            (dlq.messages, dlq.moved_out, dlq.dropped),
            (1, 2, 0),
            "retried: moved out"
        );
        let mut consumer = client.consume("orders", 10).await.unwrap();
        let mut back: Vec<String> = receive(&mut consumer, 2, Duration::from_secs(5))
            .await
            .iter()
            .map(body)
            .collect();
        back.sort();
        assert_eq!(back, ["a", "b"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_are_moved_and_removed_by_ids_or_filter() {
    let broker = Broker::start_with_config(POISON_CONFIG).await;
    let client = broker.client().await;
    client
        .create_queue("parked", "parked", RoutingType::Anycast, true)
        .await
        .unwrap();
    poison(&client, "orders", &["a", "b", "c"], "db down").await;
    let (_, dl) = get(&broker, "/api/queues/DLQ.orders/dead-letters").await;
    let all = ids(&dl["groups"][0]["message_ids"]);

    let (status, moved) = post(
        &broker,
        "/api/queues/DLQ.orders/move",
        json!({"ids": [all[0]], "to_address": "parked"}),
    )
    .await;
    assert_eq!((status, &moved["moved"]), (200, &json!(1)), "{moved}");
    assert_eq!(client.queue("parked").await.unwrap().messages, 1);

    let filter = "_AMQ_ORIG_MESSAGE_ID > 0 AND _AMQ_ORIG_QUEUE = 'orders'";
    let (_, count) = post(
        &broker,
        "/api/queues/DLQ.orders/remove",
        json!({"filter": filter, "dry_run": true}),
    )
    .await;
    assert_eq!(count["count"], 2, "{count}");
    assert_eq!(client.queue("DLQ.orders").await.unwrap().messages, 2);
    let (status, removed) = post(
        &broker,
        "/api/queues/DLQ.orders/remove",
        json!({"filter": filter}),
    )
    .await;
    assert_eq!((status, &removed["removed"]), (200, &json!(2)), "{removed}");
    assert_eq!(client.queue("DLQ.orders").await.unwrap().messages, 0);

    // The DLQ's figures add up: 3 in, 1 moved out, 2 removed, none dropped;
    // the same in the API, over gRPC and in the metrics.
    let (_, dlq) = get(&broker, "/api/queues/DLQ.orders").await;
    let figures = |q: &Value| ["added", "moved_out", "removed", "dropped"].map(|k| q[k].as_u64());
    assert_eq!(figures(&dlq), [Some(3), Some(1), Some(2), Some(0)], "{dlq}");
    let info = client.queue("DLQ.orders").await.unwrap();
    assert_eq!(
        (info.added, info.moved_out, info.removed, info.dropped),
        (3, 1, 2, 0)
    );
    let scraped = broker.scrape().await;
    for line in [
        r#"rebound_queue_moved_out_total{address="DLA",queue="DLQ.orders",routing_type="anycast"} 1"#,
        r#"rebound_queue_removed_total{address="DLA",queue="DLQ.orders",routing_type="anycast"} 2"#,
        r#"rebound_queue_dropped_total{address="DLA",queue="DLQ.orders",routing_type="anycast"} 0"#,
    ] {
        assert!(scraped.lines().any(|l| l == line), "{line} in\n{scraped}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_big_body_downloads_whole_and_the_browse_window_says_where_it_ends() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    let items: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let big = format!("{{\"items\": [{}]}}", items.join(", "));
    client
        .send(OutgoingMessage::new("big", big.clone()))
        .await
        .unwrap();
    let (_, page) = get(&broker, "/api/queues/big/messages").await;
    let m = &page["messages"][0];
    assert_eq!(m["body_truncated"], true, "{m}");
    let url = format!(
        "{}/api/queues/big/messages/{}/body",
        broker.http_url().await,
        id(&m["id"])
    );
    let answer = crate::support::http_exchange("GET", &url, None, None).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, big.as_str()));
    let head = answer.head.to_lowercase();
    assert!(
        head.contains(&format!(
            "content-disposition: attachment; filename=\"message-{}.bin\"",
            id(&m["id"])
        )),
        "{head}"
    );

    // Past the console's window of 10,000 messages, the answer says it ends there.
    for _ in 0..11 {
        let batch = (0..1000)
            .map(|i| OutgoingMessage::new("deep", format!("{i}")).durable(false))
            .collect();
        client.send_batch(batch).await.unwrap();
    }
    let (_, early) = get(&broker, "/api/queues/deep/messages?limit=50").await;
    assert_eq!(
        (&early["more"], &early["window_ended"]),
        (&json!(true), &json!(false)),
        "{early}"
    );
    let (_, last) = get(&broker, "/api/queues/deep/messages?offset=9950&limit=50").await;
    assert_eq!(last["messages"].as_array().unwrap().len(), 50);
    assert_eq!(
        (&last["more"], &last["window_ended"], &last["window"]),
        (&json!(false), &json!(true), &json!(10_000)),
        "{}",
        last["window"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_a_4xx_with_a_clear_error() {
    let broker = Broker::start_with_config(POISON_CONFIG).await;
    let client = broker.client().await;
    client.send(OutgoingMessage::new("orders", "m")).await.unwrap();
    let error = |v: &Value| {
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error in {v}"))
            .to_owned()
    };

    let (status, v) = get(&broker, "/api/queues/nope").await;
    assert_eq!((status, error(&v)), (404, "queue 'nope' not found".into()));
    let (status, v) = get(&broker, "/api/queues/orders/messages/999999").await;
    assert_eq!(status, 404, "{v}");
    assert!(error(&v).contains("message 999999 not found"), "{v}");
    let (status, v) = get(&broker, "/api/queues/orders/messages?filter=%3D%3D%3D").await;
    assert_eq!(status, 400, "{v}");
    assert!(error(&v).contains("filter"), "{v}");
    let (status, v) = get(&broker, "/api/queues/orders/messages?offset=1000000").await;
    assert_eq!(status, 400, "{v}");
    assert!(error(&v).contains("use a filter"), "{v}");
    let (status, v) = get(&broker, "/api/queues/orders/messages?limit=many").await;
    assert_eq!(status, 400, "{v}");

    let long = "a".repeat(300);
    let (status, v) = get(&broker, &format!("/api/addresses/{long}/redelivery")).await;
    assert_eq!(status, 400, "{v}");
    assert!(error(&v).contains("address"), "{v}");

    // An action must say which messages: an empty selection never means all.
    let (status, v) = post(&broker, "/api/queues/orders/remove", json!({})).await;
    assert_eq!(status, 400, "{v}");
    assert!(error(&v).contains("select the messages"), "{v}");
    assert_eq!(client.queue("orders").await.unwrap().messages, 1);
    let (status, v) = post(&broker, "/api/queues/orders/move", json!({"all": true})).await;
    assert_eq!(status, 400, "{v}");
    assert!(error(&v).contains("to_address"), "{v}");
    let (status, v) = post(&broker, "/api/queues/orders/retry", json!({"ids": "one"})).await;
    assert_eq!(status, 400, "{v}");
    assert!(error(&v).contains("ids: invalid type"), "{v}");
    let (status, v) = post(&broker, "/api/queues/orders/retry", json!({"ids": ["-1"]})).await;
    assert_eq!(status, 400, "{v}");
    assert!(error(&v).contains("expected a message id"), "{v}");
    let (status, v) = post(
        &broker,
        "/api/queues/orders/retry",
        json!({"all": true, "colour": 1}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(error(&v).contains("unknown field `colour`"), "{v}");
    let (status, v) = post(&broker, "/api/queues/nope/retry", json!({"all": true})).await;
    assert_eq!((status, error(&v)), (404, "queue 'nope' not found".into()));

    // A retry of what is not a dead letter says why it stays.
    let (status, v) = post(
        &broker,
        "/api/queues/orders/retry",
        json!({"all": true, "dry_run": true}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let why = v["outcomes"][0]["skipped"].as_str().unwrap();
    assert!(why.contains("not a dead letter"), "{v}");
}
