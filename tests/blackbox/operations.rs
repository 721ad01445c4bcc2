//! Operating a broker: graceful consumer close, selector consumers, the management
//! operations on selected messages (count, remove, move, retry dead letters),
//! redelivery schedules, and live config reload. Each test starts the real broker
//! from a config file and drives it through the SDK and the `rebound` CLI.
use std::time::{Duration, Instant};

use rebound_client::{Client, Code, OutgoingMessage, Selection};
use serde_json::Value;

use crate::messaging::{body, receive};
use crate::redelivery::{int, next, text};
use crate::support::{Broker, CliOutput, cli};

/// Long enough to be sure a message is not coming.
const QUIET: Duration = Duration::from_millis(600);

/// Every address dead-letters to `DLQ` after one failed delivery; `events` is a
/// multicast address with subscriptions `a` and `b`; `capped` may be retried once.
const DLQ_CONFIG: &str = r##"
[[address-settings]]
match = "#"
max-delivery-attempts = 1
dead-letter-address = "DLQ"

[[address-settings]]
match = "capped"
max-redrive = 1

[[addresses]]
name = "DLQ"
[[addresses.queues]]
name = "DLQ"

[[addresses]]
name = "events"
routing-type = "multicast"
[[addresses.queues]]
name = "a"
[[addresses.queues]]
name = "b"

[[addresses]]
name = "capped"
[[addresses.queues]]
name = "capped"
"##;

/// Takes the next message of `queue` and fails it (a nack), waiting until the
/// broker has applied that.
async fn fail_next(client: &Client, queue: &str) {
    let mut c = client.consume_manual_credit(queue, 1).await.unwrap();
    let d = next(&mut c).await;
    c.nack(&[d.id], "poisoned").await.unwrap();
    c.close().await.unwrap();
}

async fn count(client: &Client, selection: Selection) -> u64 {
    client.count_messages(&selection).await.unwrap()
}

/// `rebound queue browse --json` of `queue`: the messages' JSON objects.
async fn browse_json(broker: &Broker, queue: &str) -> Vec<Value> {
    cli(broker, ["queue", "browse", "--queue", queue, "--json"])
        .await
        .success()
        .json_lines()
}

/// The only line of a successful command's stdout.
#[track_caller]
fn only_line(out: &CliOutput) -> &str {
    let lines: Vec<&str> = out.success().stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    lines[0]
}

/// Asserts a failed command printed one error line naming the selector's column.
#[track_caller]
fn refused_with_column(out: &CliOutput, column: usize) {
    out.failure(1);
    let stderr = out.stderr.trim_end();
    assert!(!stderr.contains('\n'), "one line: {stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains(&format!("column {column}"))
            && stderr.ends_with("(INVALID_ARGUMENT)"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn close_returns_held_deliveries_uncounted_and_a_dropped_consumer_counts_them() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "#"
max-delivery-attempts = -1

[[addresses]]
name = "held"
[[addresses.queues]]
name = "held"
"##,
    )
    .await;
    let client = broker.client().await;
    for i in 0..4 {
        client
            .send(OutgoingMessage::new("held", format!("m{i}")))
            .await
            .unwrap();
    }

    // A window consumer takes three deliveries (the fourth may sit unseen in its
    // buffer) and closes without settling any.
    let mut c = client.consumer("held").window(4).open().await.unwrap();
    let taken = receive(&mut c, 3, Duration::from_secs(5)).await;
    assert_eq!(taken.len(), 3);
    assert!(taken.iter().all(|d| d.delivery_count == 1));
    c.close().await.unwrap();
    assert_eq!(client.queue("held").await.unwrap().delivering, 0, "all returned");

    let mut c = client.consumer("held").window(4).open().await.unwrap();
    let again = receive(&mut c, 4, Duration::from_secs(5)).await;
    let counts: Vec<u32> = again.iter().map(|d| d.delivery_count).collect();
    assert_eq!(counts, [1, 1, 1, 1], "a graceful close counts no attempt");

    // Dropped without close: every delivery it held was a failed attempt.
    drop(c);
    let mut c = client.consumer("held").window(4).open().await.unwrap();
    let after_drop = receive(&mut c, 4, Duration::from_secs(5)).await;
    let counts: Vec<u32> = after_drop.iter().map(|d| d.delivery_count).collect();
    assert_eq!(counts, [2, 2, 2, 2], "dropping a consumer counts its deliveries");
    let ids: Vec<u64> = after_drop.iter().map(|d| d.id).collect();
    c.ack(&ids).await.unwrap();
    c.close().await.unwrap();
    assert_eq!(client.queue("held").await.unwrap().messages, 0);
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn retry_sends_a_multicast_dead_letter_back_to_its_own_subscription_only() {
        let broker = Broker::start_with_config(DLQ_CONFIG).await;
        let client = broker.client().await;
        client
            .send(OutgoingMessage::new("events", "poison").property("kind", "order"))
            .await
            .unwrap();
        // `b` processes its copy; `a` fails its copy into the DLQ.
        let mut b = client.consume("b", 10).await.unwrap();
        let d = next(&mut b).await;
        b.ack(&[d.id]).await.unwrap();
        b.flush().await.unwrap();
        fail_next(&client, "a").await;
        assert_eq!(count(&client, Selection::new("DLQ")).await, 1);

        // Browsing the DLQ shows the reason, in the table and in the JSON.
        let table = cli(&broker, ["queue", "browse", "--queue", "DLQ"]).await;
        let lines: Vec<&str> = table.success().stdout.lines().collect();
        assert_eq!(lines.len(), 2, "header and one message: {lines:?}");
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        assert_eq!(
            header,
            ["ID", "STATE", "DELIVERIES", "REASON", "PROPERTIES", "BODY"]
        );
        let row: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(row[1..4], ["ready", "0", "max-delivery-attempts"], "{}", lines[1]);
        assert!(
            lines[1].contains("kind=order") && lines[1].contains("_AMQ_ORIG_QUEUE=a"),
            "{}",
            lines[1]
        );
        assert!(lines[1].ends_with("poison"), "{}", lines[1]);
        let dead = browse_json(&broker, "DLQ").await;
        let props = &dead[0]["properties"];
        assert_eq!(props["_REBOUND_DEAD_LETTER_REASON"], "max-delivery-attempts");
        assert_eq!(
            (&props["_AMQ_ORIG_ADDRESS"], &props["_AMQ_ORIG_QUEUE"]),
            (&"events".into(), &"a".into())
        );
        let dead_id = dead[0]["message_id"].as_u64().unwrap();

        // A dry run names the target and moves nothing.
        let dry = cli(&broker, ["queue", "retry", "--queue", "DLQ", "--dry-run"]).await;
        assert_eq!(
            dry.success().stdout,
            format!("dry run: would move 1 messages from DLQ, skip 0\n#{dead_id} → events/a\n")
        );
        let dry = cli(
            &broker,
            ["queue", "retry", "--queue", "DLQ", "--dry-run", "--json"],
        )
        .await;
        let report: Value = serde_json::from_str(only_line(&dry)).unwrap();
        assert_eq!(report["moved"], 0);
        assert_eq!(report["outcomes"][0]["to_queue"], "a");
        assert_eq!(report["outcomes"][0]["skipped"], Value::Null);
        assert_eq!(count(&client, Selection::new("DLQ")).await, 1);
        assert_eq!(count(&client, Selection::new("a")).await, 0);

        // The retry: back on `a` only, as a fresh message with one redrive.
        let retried = cli(&broker, ["queue", "retry", "--queue", "DLQ"]).await;
        assert_eq!(only_line(&retried), "moved 1 messages from DLQ, skipped 0");
        assert_eq!(count(&client, Selection::new("DLQ")).await, 0);
        let mut a = client.consume("a", 10).await.unwrap();
        let d = next(&mut a).await;
        assert_eq!((body(&d).as_str(), d.delivery_count), ("poison", 1));
        assert_eq!(int(&d, "_REBOUND_REDRIVE_COUNT"), 1);
        assert_eq!(text(&d, "kind"), "order");
        assert!(
            !d.message.properties.contains_key("_AMQ_ORIG_QUEUE"),
            "the death properties are gone"
        );
        assert!(
            receive(&mut b, 1, QUIET).await.is_empty(),
            "b gets no second copy"
        );
        assert_eq!(client.queue("b").await.unwrap().messages, 0);

        // A second failure and retry, by message id: the redrive count goes on.
        a.nack(&[d.id], "poisoned again").await.unwrap();
        a.flush().await.unwrap();
        let dead_id = browse_json(&broker, "DLQ").await[0]["message_id"]
            .as_u64()
            .unwrap();
        let retried = cli(
            &broker,
            [
                "queue",
                "retry",
                "--queue",
                "DLQ",
                "--message-id",
                &dead_id.to_string(),
            ],
        )
        .await;
        assert_eq!(only_line(&retried), "moved 1 messages from DLQ, skipped 0");
        let d = next(&mut a).await;
        assert_eq!((d.delivery_count, int(&d, "_REBOUND_REDRIVE_COUNT")), (1, 2));
        a.ack(&[d.id]).await.unwrap();
        a.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn max_redrive_leaves_the_dead_letter_on_the_dlq_with_a_reason() {
    let broker = Broker::start_with_config(DLQ_CONFIG).await;
    let client = broker.client().await;
    client
        .send(OutgoingMessage::new("capped", "again and again"))
        .await
        .unwrap();
    fail_next(&client, "capped").await;
    let retried = cli(&broker, ["queue", "retry", "--queue", "DLQ"]).await;
    assert_eq!(only_line(&retried), "moved 1 messages from DLQ, skipped 0");
    fail_next(&client, "capped").await;

    let dead_id = browse_json(&broker, "DLQ").await[0]["message_id"]
        .as_u64()
        .unwrap();
    let refused = cli(&broker, ["queue", "retry", "--queue", "DLQ"]).await;
    assert_eq!(
        refused.success().stdout,
        format!(
            "moved 0 messages from DLQ, skipped 1\n#{dead_id} skipped: already retried 1 times (max-redrive 1)\n"
        )
    );
    let response = client
        .retry_messages(&Selection::new("DLQ"), false, 0)
        .await
        .unwrap();
    assert_eq!((response.moved, response.skipped), (0, 1));
    assert!(
        response.outcomes[0].skipped.contains("max-redrive"),
        "{response:?}"
    );
    assert_eq!(
        count(&client, Selection::new("DLQ")).await,
        1,
        "it stays on the DLQ"
    );
    assert_eq!(count(&client, Selection::new("capped")).await, 0);
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn move_remove_and_count_touch_only_the_selected_messages() {
        let broker = Broker::start_with_config(
            r##"
    [[addresses]]
    name = "colors"
    [[addresses.queues]]
    name = "colors"
    "##,
        )
        .await;
        let client = broker.client().await;
        let messages = (0..6).map(|n| {
            let color = if n % 2 == 0 { "red" } else { "blue" };
            OutgoingMessage::new("colors", format!("{color} {n}"))
                .property("color", color)
                .property("n", n)
        });
        let ids = client.send_batch(messages.collect()).await.unwrap().message_ids;
        let count_cli = |filter: &'static str| {
            let broker = &broker;
            async move {
                let mut args = vec!["queue", "count", "--queue", "colors"];
                if !filter.is_empty() {
                    args.extend(["--filter", filter]);
                }
                only_line(&cli(broker, args).await).to_owned()
            }
        };
        assert_eq!(count_cli("").await, "6");
        assert_eq!(count_cli("color = 'red'").await, "3");

        let moved = cli(
            &broker,
            [
                "queue",
                "move",
                "--queue",
                "colors",
                "--to-address",
                "reds",
                "--filter",
                "color = 'red'",
            ],
        )
        .await;
        assert_eq!(only_line(&moved), "moved 3 messages from colors to reds");
        assert_eq!(count_cli("").await, "3");
        assert_eq!(count_cli("color = 'blue'").await, "3");
        let reds = browse_json(&broker, "reds").await;
        let bodies: Vec<&str> = reds.iter().map(|m| m["body"].as_str().unwrap()).collect();
        assert_eq!(bodies, ["red 0", "red 2", "red 4"]);

        let removed = cli(
            &broker,
            ["queue", "remove", "--queue", "colors", "--filter", "n > 2"],
        )
        .await;
        assert_eq!(only_line(&removed), "removed 2 messages from colors");
        let left = browse_json(&broker, "colors").await;
        assert_eq!(left.len(), 1);
        assert_eq!(left[0]["body"], "blue 1");
        let removed = cli(
            &broker,
            [
                "queue",
                "remove",
                "--queue",
                "colors",
                "--message-id",
                &ids[1].to_string(),
            ],
        )
        .await;
        assert_eq!(only_line(&removed), "removed 1 messages from colors");
        let info = client.queue("colors").await.unwrap();
        assert_eq!((info.messages, info.removed, info.dropped), (0, 3, 0));

        // The SDK agrees, and a filter and a message id exclude each other on the CLI.
        assert_eq!(count(&client, Selection::new("reds").filter("n = 2")).await, 1);
        assert_eq!(
            client
                .move_messages(&Selection::new("reds").filter("n = 2"), "colors")
                .await
                .unwrap(),
            1
        );
        assert_eq!(client.remove_messages(&Selection::new("reds")).await.unwrap(), 2);
        cli(
            &broker,
            [
                "queue",
                "count",
                "--queue",
                "reds",
                "--filter",
                "n = 2",
                "--message-id",
                "1",
            ],
        )
        .await
        .failure(2);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_rate_paces_the_moves() {
    let broker = Broker::start_with_config(DLQ_CONFIG).await;
    let client = broker.client().await;
    let batch = (0..5)
        .map(|i| OutgoingMessage::new("orders", format!("o{i}")))
        .collect();
    client.send_batch(batch).await.unwrap();
    let mut c = client.consume("orders", 10).await.unwrap();
    let got = receive(&mut c, 5, Duration::from_secs(5)).await;
    let ids: Vec<u64> = got.iter().map(|d| d.id).collect();
    c.nack(&ids, "poisoned").await.unwrap();
    c.flush().await.unwrap();
    assert_eq!(count(&client, Selection::new("DLQ")).await, 5);

    let started = Instant::now();
    let retried = cli(&broker, ["queue", "retry", "--queue", "DLQ", "--rate", "10"]).await;
    let took = started.elapsed();
    assert_eq!(only_line(&retried), "moved 5 messages from DLQ, skipped 0");
    assert!(
        took >= Duration::from_millis(400),
        "5 messages at 10/s took only {took:?}"
    );
    let back = receive(&mut c, 5, Duration::from_secs(5)).await;
    assert_eq!(back.len(), 5, "all back on orders");
}

#[tokio::test(flavor = "multi_thread")]
async fn selector_consumers_see_only_their_messages() {
    let broker = Broker::start_with_config(
        r##"
[[addresses]]
name = "paint"
[[addresses.queues]]
name = "paint"
"##,
    )
    .await;
    let client = broker.client().await;
    let colors = ["red", "blue", "green", "red", "blue"];
    let batch = colors
        .iter()
        .enumerate()
        .map(|(n, &color)| OutgoingMessage::new("paint", format!("{color} {n}")).property("color", color))
        .collect();
    client.send_batch(batch).await.unwrap();

    let greens = cli(
        &broker,
        [
            "queue",
            "browse",
            "--queue",
            "paint",
            "--filter",
            "color = 'green'",
            "--json",
        ],
    )
    .await;
    assert_eq!(greens.json_lines().len(), 1);

    let reds = cli(
        &broker,
        [
            "receive",
            "--queue",
            "paint",
            "--filter",
            "color = 'red'",
            "--count",
            "5",
            "--timeout-ms",
            "800",
            "--json",
        ],
    )
    .await;
    let bodies: Vec<String> = reds
        .json_lines()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(bodies, ["red 0", "red 3"]);

    let mut blues = client
        .consumer("paint")
        .window(10)
        .filter("color = 'blue'")
        .open()
        .await
        .unwrap();
    let got = receive(&mut blues, 5, QUIET).await;
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["blue 1", "blue 4"]);
    blues
        .ack(&got.iter().map(|d| d.id).collect::<Vec<_>>())
        .await
        .unwrap();
    blues.close().await.unwrap();

    // What no selector took stays for the others.
    let mut anyone = client.consume("paint", 10).await.unwrap();
    let rest = receive(&mut anyone, 5, QUIET).await;
    assert_eq!(rest.iter().map(body).collect::<Vec<_>>(), ["green 2"]);

    // "color = " ends where an expression should start: column 9.
    let bad = "color = ";
    refused_with_column(
        &cli(&broker, ["receive", "--queue", "paint", "--filter", bad]).await,
        9,
    );
    refused_with_column(
        &cli(&broker, ["queue", "browse", "--queue", "paint", "--filter", bad]).await,
        9,
    );
    refused_with_column(
        &cli(&broker, ["queue", "count", "--queue", "paint", "--filter", bad]).await,
        9,
    );
    let err = client.consumer("paint").filter(bad).open().await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));
    assert!(err.to_string().contains("column 9"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn redelivery_schedule_delays_then_moves_instead_of_the_fourth_delivery() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "x"
max-delivery-attempts = -1
redelivery-schedule = "2:100; 4:move(queue:dlq$x)"

[[address-settings]]
match = "y"
max-delivery-attempts = -1
redelivery-schedule = "3:delete"
"##,
    )
    .await;
    let client = broker.client().await;
    client.send(OutgoingMessage::new("x", "scheduled")).await.unwrap();
    let mut c = client.consume("x", 1).await.unwrap();
    // The step with the greatest index not above the delivery number applies: no
    // step before delivery 1, `2:100` before deliveries 2 and 3, and `4:move`
    // instead of delivery 4.
    let mut gaps = Vec::new();
    let mut failed_at = None;
    for number in 1..=3 {
        let d = next(&mut c).await;
        if let Some(at) = failed_at {
            gaps.push(Instant::now().duration_since(at));
        }
        assert_eq!(d.delivery_count, number);
        failed_at = Some(Instant::now());
        c.nack(&[d.id], "not yet").await.unwrap();
    }
    c.flush().await.unwrap();
    assert!(
        gaps.iter()
            .all(|gap| (Duration::from_millis(90)..Duration::from_secs(3)).contains(gap)),
        "each redelivery waits ~100 ms: {gaps:?}"
    );
    assert!(receive(&mut c, 1, QUIET).await.is_empty(), "no 4th delivery");

    let moved = client.queue("dlqxx").await.expect("the move created dlqxx");
    assert_eq!(moved.routing_type(), rebound_client::RoutingType::Anycast);
    let mut dlq = client.consume("dlqxx", 1).await.unwrap();
    let d = next(&mut dlq).await;
    assert_eq!(body(&d), "scheduled");
    assert_eq!(text(&d, "_AMQ_ORIG_ADDRESS"), "x");
    assert_eq!(text(&d, "_REBOUND_DEAD_LETTER_REASON"), "schedule");
    assert_eq!(int(&d, "_REBOUND_DELIVERY_COUNT"), 3);

    // `3:delete`: two deliveries, then it is dropped instead of the third.
    client.send(OutgoingMessage::new("y", "doomed")).await.unwrap();
    let mut c = client.consume("y", 1).await.unwrap();
    for number in 1..=2 {
        let d = next(&mut c).await;
        assert_eq!(d.delivery_count, number);
        c.nack(&[d.id], "no").await.unwrap();
    }
    c.flush().await.unwrap();
    assert!(receive(&mut c, 1, QUIET).await.is_empty(), "no 3rd delivery");
    let info = client.queue("y").await.unwrap();
    assert_eq!((info.messages, info.dropped, info.dead_lettered), (0, 1, 0));
}

/// The effective `redelivery-delay` of `address` as the broker reports it.
async fn redelivery_delay(client: &Client, address: &str) -> String {
    let settings = client.settings(address).await.unwrap();
    settings
        .into_iter()
        .find(|s| s.key == "redelivery-delay")
        .unwrap()
        .value
}

const LIVE_FAST: &str = r##"
[[address-settings]]
match = "live"
redelivery-delay = 0
max-delivery-attempts = -1
"##;

const LIVE_SLOW: &str = r##"
config-reload-period = 200

[[address-settings]]
match = "live"
redelivery-delay = 1500
max-delivery-attempts = -1
"##;

#[tokio::test(flavor = "multi_thread")]
async fn sighup_applies_a_new_config_to_attached_consumers_and_rejects_a_bad_one() {
    let broker = Broker::start_with_config(LIVE_FAST).await;
    let client = broker.client().await;
    client.send(OutgoingMessage::new("live", "again")).await.unwrap();
    let mut c = client.consume("live", 1).await.unwrap();
    let d = next(&mut c).await;
    let nacked = Instant::now();
    c.nack(&[d.id], "once").await.unwrap();
    let d = next(&mut c).await;
    assert!(
        nacked.elapsed() < Duration::from_millis(1000),
        "redelivery-delay 0: at once"
    );

    // Timing a nack on the consumer that stayed attached through the reload.
    let redelivered_after = async |c: &mut rebound_client::Consumer, id| {
        let nacked = Instant::now();
        c.nack(&[id], "again").await.unwrap();
        let d = next(c).await;
        (d, nacked.elapsed())
    };

    broker.rewrite_config(LIVE_SLOW);
    broker.hup();
    broker.wait_for_log("config reloaded").await;
    assert_eq!(redelivery_delay(&client, "live").await, "1500");
    let (d, waited) = redelivered_after(&mut c, d.id).await;
    assert!(
        waited >= Duration::from_millis(1400),
        "the new delay applies: {waited:?}"
    );

    // Line 7 has an unknown key: rejected with file and line, the old settings stay.
    broker.rewrite_config(&format!("{}bogus-key = 1\n", LIVE_SLOW.trim_start()));
    broker.hup();
    let log = broker.wait_for_log("config reload rejected").await;
    let rejected = log
        .lines()
        .find(|l| l.contains("config reload rejected"))
        .unwrap();
    let file = broker.dir().join("rebound.toml");
    assert!(
        rejected.contains(&format!("{}:7:1", file.display())),
        "{rejected}"
    );
    assert!(rejected.contains("bogus-key"), "{rejected}");
    assert_eq!(redelivery_delay(&client, "live").await, "1500");
    let (d, waited) = redelivered_after(&mut c, d.id).await;
    assert!(
        waited >= Duration::from_millis(1400),
        "the delay in force stays: {waited:?}"
    );
    c.ack(&[d.id]).await.unwrap();
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_config_file_is_picked_up_within_the_reload_period() {
    let broker = Broker::start_with_config(&LIVE_SLOW.replace("1500", "0")).await;
    let client = broker.client().await;
    assert_eq!(redelivery_delay(&client, "live").await, "0");
    broker.rewrite_config(LIVE_SLOW);
    let started = Instant::now();
    while redelivery_delay(&client, "live").await != "1500" {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "not reloaded within 3 s (period 200 ms)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    broker.wait_for_log("config file changed: reloading").await;
}

/// Engine bug (reported to the lead): a move to an address without queues drops the
/// messages (counted as `dropped`) yet reports them as moved.
#[tokio::test(flavor = "multi_thread")]
async fn a_move_to_an_address_without_queues_moves_nothing_and_loses_nothing() {
    let broker = Broker::start_with_config(
        r##"
[[addresses]]
name = "colors"
[[addresses.queues]]
name = "colors"

[[addresses]]
name = "nowhere"
routing-type = "multicast"
"##,
    )
    .await;
    let client = broker.client().await;
    let batch = (0..2)
        .map(|i| OutgoingMessage::new("colors", format!("c{i}")))
        .collect();
    client.send_batch(batch).await.unwrap();
    let moved = client.move_messages(&Selection::new("colors"), "nowhere").await;
    let info = client.queue("colors").await.unwrap();
    assert_eq!(
        (moved.as_ref().ok(), info.messages, info.dropped),
        (Some(&0), 2, 0),
        "moved {moved:?}; the messages must stay where they were"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill9_in_the_middle_of_a_retry_loses_and_duplicates_nothing() {
    const N: usize = 200;
    let mut broker = Broker::start_with_config(DLQ_CONFIG).await;
    let client = broker.client().await;
    let batch = (0..N)
        .map(|i| OutgoingMessage::new("orders", format!("m{i}")))
        .collect();
    client.send_batch(batch).await.unwrap();
    let mut c = client.consume("orders", 50).await.unwrap();
    for _ in 0..N {
        let d = next(&mut c).await;
        c.nack(&[d.id], "poison").await.unwrap();
    }
    c.flush().await.unwrap();
    drop(c);
    assert_eq!(client.queue("DLQ").await.unwrap().messages, N as u64);

    // 100 messages a second: the kill lands while the retry is half done.
    let retrying = {
        let client = client.clone();
        tokio::spawn(async move { client.retry_messages(&Selection::new("DLQ"), false, 100).await })
    };
    tokio::time::sleep(Duration::from_millis(900)).await;
    broker.kill9();
    assert!(
        retrying.await.unwrap().is_err(),
        "the retry was cut off by the kill"
    );
    broker.restart().await;

    let client = broker.client().await;
    let mut bodies = Vec::new();
    for queue in ["orders", "DLQ"] {
        let browsed = client.browse(queue, 1000).await.unwrap();
        bodies.extend(
            browsed
                .iter()
                .map(|b| String::from_utf8_lossy(&b.message.body).into_owned()),
        );
    }
    let moved = client.queue("orders").await.unwrap().messages;
    assert!(
        moved > 0 && moved < N as u64,
        "the kill came mid-retry: {moved} moved"
    );
    bodies.sort();
    let total = bodies.len();
    bodies.dedup();
    assert_eq!(
        (total, bodies.len()),
        (N, N),
        "every message in exactly one of the two queues"
    );
}
