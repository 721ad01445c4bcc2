//! The `rebound` command line, end to end: every client subcommand against a
//! real broker, and the offline `config` subcommands against files.
//!
//! What is checked is the CLI's interface: output formats (the `--json` keys and
//! their order are documented), exit codes, and one-line error messages.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use crate::support::{Broker, cli, json_keys, rebound, temp_file};

/// The keys of `rebound receive --json`, in their documented order.
const RECEIVE_KEYS: [&str; 12] = [
    "message_id",
    "address",
    "queue",
    "body",
    "body_base64",
    "properties",
    "delivery_count",
    "redelivered",
    "durable",
    "priority",
    "timestamp_ms",
    "expiration_ms",
];

/// The keys of `rebound queue list --json` and `queue stat --json`.
const QUEUE_KEYS: [&str; 25] = [
    "name",
    "address",
    "routing_type",
    "durable",
    "auto_created",
    "messages",
    "delivering",
    "scheduled",
    "consumers",
    "added",
    "acked",
    "redelivered",
    "dead_lettered",
    "dropped",
    "expired",
    "removed",
    "moved_out",
    "bytes",
    "state",
    "outage_since_ms",
    "next_probe_at_ms",
    "paged_messages",
    "paged_bytes",
    "counting",
    "served_by",
];

/// Creates an anycast queue `name` on an address of the same name.
async fn create_queue(broker: &Broker, name: &str) {
    cli(broker, ["queue", "create", "--address", name, "--queue", name])
        .await
        .success();
}

/// `rebound queue stat --json` as a JSON object.
async fn stat(broker: &Broker, queue: &str) -> Value {
    cli(broker, ["queue", "stat", "--queue", queue, "--json"])
        .await
        .success()
        .json_lines()
        .remove(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn send_and_receive_json_round_trip() {
    let broker = Broker::start().await;
    create_queue(&broker, "orders").await;
    let body: &[u8] = &[0xff, 0x00, 0x80, b'x'];
    let body_file = broker.dir().join("body.bin");
    std::fs::write(&body_file, body).unwrap();

    let sent = cli(
        &broker,
        [
            "send",
            "--address",
            "orders",
            "--body-file",
            body_file.to_str().unwrap(),
            "--property",
            "text=hello",
            "--property",
            "quoted:string=42",
            "--property",
            "n=42",
            "--property",
            "typed:int=-3",
            "--property",
            "ratio=2.5",
            "--property",
            "whole:double=2",
            "--property",
            "flag=true",
            "--property",
            "off:bool=false",
            "--property",
            "raw:bytes=AAEC",
            "--priority",
            "7",
        ],
    )
    .await;
    assert_eq!(sent.success().stdout, "sent 1 message to orders\n");

    let received = cli(&broker, ["receive", "--queue", "orders", "--json"]).await;
    let line = received
        .success()
        .stdout
        .lines()
        .next()
        .expect("one message")
        .to_owned();
    assert_eq!(json_keys(&line), RECEIVE_KEYS);
    let message: Value = serde_json::from_str(&line).unwrap();
    assert!(message["message_id"].is_u64(), "{message}");
    assert_eq!(message["address"], "orders");
    assert_eq!(message["queue"], "orders");
    assert_eq!(message["body"], BASE64.encode(body));
    assert_eq!(message["body_base64"], true);
    assert_eq!(
        message["properties"],
        json!({
            "text": "hello",
            "quoted": "42",
            "n": 42,
            "typed": -3,
            "ratio": 2.5,
            "whole": 2.0,
            "flag": true,
            "off": false,
            "raw": {"base64": "AAEC"},
        })
    );
    assert!(
        message["properties"]["whole"].is_f64(),
        "a double stays a JSON float: {message}"
    );
    assert_eq!(message["delivery_count"], 1);
    assert_eq!(message["redelivered"], false);
    assert_eq!(message["durable"], true);
    assert_eq!(message["priority"], 7);
    assert!(
        message["timestamp_ms"].as_u64().unwrap() > 1_600_000_000_000,
        "{message}"
    );
    assert_eq!(message["expiration_ms"], 0);

    // Acked and flushed: the queue is empty once receive has returned.
    let stat = stat(&broker, "orders").await;
    assert_eq!(
        (stat["messages"].as_u64(), stat["acked"].as_u64()),
        (Some(0), Some(1)),
        "{stat}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn send_count_then_receive_text_and_json() {
    let broker = Broker::start().await;
    create_queue(&broker, "jobs").await;
    let sent = cli(
        &broker,
        [
            "send",
            "--address",
            "jobs",
            "--body",
            "hello",
            "--count",
            "3",
            "--non-durable",
        ],
    )
    .await;
    assert_eq!(sent.success().stdout, "sent 3 messages to jobs\n");

    let text = cli(&broker, ["receive", "--queue", "jobs", "--timeout-ms", "2000"]).await;
    let lines: Vec<&str> = text.success().stdout.lines().collect();
    assert_eq!(lines.len(), 1, "--count defaults to 1: {lines:?}");
    assert!(
        lines[0].starts_with('#') && lines[0].ends_with("(delivery 1): hello"),
        "{lines:?}"
    );

    // Asking for more than there is: what there is, the shortfall on stderr, exit 0.
    let json = cli(
        &broker,
        [
            "receive",
            "--queue",
            "jobs",
            "--count",
            "5",
            "--timeout-ms",
            "500",
            "--json",
        ],
    )
    .await;
    let messages = json.success().json_lines();
    assert_eq!(messages.len(), 2);
    for message in &messages {
        assert_eq!(
            (&message["body"], &message["body_base64"]),
            (&json!("hello"), &json!(false))
        );
        assert_eq!(message["durable"], false);
        assert_eq!(message["properties"], json!({}));
    }
    assert!(messages[0]["message_id"].as_u64() < messages[1]["message_id"].as_u64());
    assert!(
        json.stderr.contains("received 2 of 5 messages"),
        "{}",
        json.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn nack_then_receive_again_is_a_redelivery() {
    let broker = Broker::start().await;
    create_queue(&broker, "retry").await;
    cli(&broker, ["send", "--address", "retry", "--body", "flaky"])
        .await
        .success();

    let first = cli(&broker, ["receive", "--queue", "retry", "--nack", "--json"]).await;
    let first = first.success().json_lines().remove(0);
    assert_eq!(
        (&first["delivery_count"], &first["redelivered"]),
        (&json!(1), &json!(false))
    );

    let second = cli(
        &broker,
        ["receive", "--queue", "retry", "--json", "--timeout-ms", "10000"],
    )
    .await;
    let second = second.success().json_lines().remove(0);
    assert_eq!(second["message_id"], first["message_id"]);
    assert_eq!(
        (&second["delivery_count"], &second["redelivered"]),
        (&json!(2), &json!(true))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_create_list_stat_browse_purge_delete() {
    let broker = Broker::start().await;
    let created = cli(
        &broker,
        [
            "queue",
            "create",
            "--address",
            "events",
            "--queue",
            "audit",
            "--routing-type",
            "multicast",
            "--non-durable",
        ],
    )
    .await;
    assert_eq!(
        created.success().stdout,
        "created queue audit (multicast, non-durable) on address events\n"
    );

    let list = cli(&broker, ["queue", "list", "--json"]).await;
    let line = list
        .success()
        .stdout
        .lines()
        .find(|l| l.contains("\"audit\""))
        .expect("audit is listed")
        .to_owned();
    assert_eq!(json_keys(&line), QUEUE_KEYS);
    let audit: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(audit["address"], "events");
    assert_eq!(audit["routing_type"], "multicast");
    assert_eq!(audit["durable"], false);
    assert_eq!(audit["auto_created"], false);

    cli(
        &broker,
        ["send", "--address", "events", "--body", "e", "--count", "2"],
    )
    .await
    .success();
    let stat = cli(&broker, ["queue", "stat", "--queue", "audit", "--json"]).await;
    let line = stat.success().stdout.trim_end().to_owned();
    assert_eq!(json_keys(&line), QUEUE_KEYS);
    let stat: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (stat["messages"].as_u64(), stat["added"].as_u64()),
        (Some(2), Some(2)),
        "{stat}"
    );

    let text = cli(&broker, ["queue", "stat", "--queue", "audit"]).await;
    let lines: Vec<&str> = text.success().stdout.lines().collect();
    let keys: Vec<&str> = lines
        .iter()
        .map(|l| l.split_once(": ").expect("key: value").0)
        .collect();
    assert_eq!(keys, QUEUE_KEYS);
    assert!(
        lines.contains(&"name: audit") && lines.contains(&"messages: 2"),
        "{lines:?}"
    );

    let table = cli(&broker, ["queue", "list"]).await;
    let table = &table.success().stdout;
    let header = table.lines().next().unwrap();
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        columns[..4],
        ["NAME", "ADDRESS", "ROUTING-TYPE", "DURABLE"],
        "{table}"
    );
    assert!(
        columns.contains(&"DEAD-LETTERED") && columns.contains(&"EXPIRED") && columns.contains(&"STATE"),
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("audit "))
        .expect("a row for audit")
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..5],
        ["audit", "events", "multicast", "false", "2"],
        "{table}"
    );

    let browsed = cli(
        &broker,
        ["queue", "browse", "--queue", "audit", "--json", "--limit", "1"],
    )
    .await;
    let lines: Vec<&str> = browsed.success().stdout.lines().collect();
    assert_eq!(lines.len(), 1, "--limit 1: {lines:?}");
    let expected_keys: Vec<&str> = RECEIVE_KEYS
        .iter()
        .copied()
        .chain(["state", "scheduled_at_ms"])
        .collect();
    assert_eq!(json_keys(lines[0]), expected_keys);
    let message: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(
        (&message["state"], &message["delivery_count"], &message["queue"]),
        (&json!("ready"), &json!(0), &json!("audit"))
    );
    assert_eq!(
        stat_messages(&broker, "audit").await,
        2,
        "browsing consumes nothing"
    );

    let purged = cli(&broker, ["queue", "purge", "--queue", "audit"]).await;
    assert_eq!(purged.success().stdout, "purged 2 messages from audit\n");
    assert_eq!(stat_messages(&broker, "audit").await, 0);

    let deleted = cli(&broker, ["queue", "delete", "--queue", "audit"]).await;
    assert_eq!(deleted.success().stdout, "deleted queue audit\n");
    let list = cli(&broker, ["queue", "list", "--json"]).await;
    assert!(
        list.success().json_lines().iter().all(|q| q["name"] != "audit"),
        "{}",
        list.stdout
    );
}

async fn stat_messages(broker: &Broker, queue: &str) -> u64 {
    stat(broker, queue).await["messages"]
        .as_u64()
        .expect("messages is a number")
}

#[tokio::test(flavor = "multi_thread")]
async fn address_create_and_delete() {
    let broker = Broker::start().await;
    let created = cli(
        &broker,
        [
            "address",
            "create",
            "--name",
            "news",
            "--routing-type",
            "multicast",
        ],
    )
    .await;
    assert_eq!(created.success().stdout, "created address news\n");
    cli(
        &broker,
        ["queue", "create", "--address", "news", "--queue", "reader"],
    )
    .await
    .success();

    let refused = cli(&broker, ["address", "delete", "--name", "news"]).await;
    assert!(
        refused.failure(1).stderr.contains("(FAILED_PRECONDITION)"),
        "{}",
        refused.stderr
    );
    let deleted = cli(&broker, ["address", "delete", "--name", "news", "--force"]).await;
    assert_eq!(deleted.success().stdout, "deleted address news\n");
    let gone = cli(&broker, ["queue", "stat", "--queue", "reader"]).await;
    assert!(gone.failure(1).stderr.contains("(NOT_FOUND)"), "{}", gone.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn stat_of_an_unknown_queue_is_one_error_line() {
    let broker = Broker::start().await;
    let out = cli(&broker, ["queue", "stat", "--queue", "nope"]).await;
    out.failure(1);
    assert_eq!(out.stdout, "");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains("nope") && lines[0].ends_with("(NOT_FOUND)"),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn send_to_an_empty_address_is_invalid_argument() {
    let broker = Broker::start().await;
    let out = cli(&broker, ["send", "--address", "", "--body", "x"]).await;
    out.failure(1);
    assert!(
        out.stderr.starts_with("error: ") && out.stderr.trim_end().ends_with("(INVALID_ARGUMENT)"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn live_settings_name_their_source() {
    let broker = Broker::start_with_config(SETTINGS_TOML).await;
    let out = cli(&broker, ["settings", "--address", "orders.eu"]).await;
    assert_settings_table(&out.success().stdout);
}

/// Two matching entries and a key neither sets.
const SETTINGS_TOML: &str = r##"
[[address-settings]]
match = "#"
redelivery-delay = 250
max-delivery-attempts = 5

[[address-settings]]
match = "orders.#"
max-delivery-attempts = 3
"##;

/// The table of `config resolve` / `settings` for `orders.eu` under [`SETTINGS_TOML`].
#[track_caller]
fn assert_settings_table(table: &str) {
    let row = |key: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no row for {key}:\n{table}"))
            .to_owned()
    };
    let delay = row("redelivery-delay");
    assert!(
        delay.contains("250") && delay.ends_with(r##"match "#""##),
        "{delay}"
    );
    let attempts = row("max-delivery-attempts");
    assert!(
        attempts.contains(" 3 ") && attempts.ends_with(r##"match "orders.#""##),
        "{attempts}"
    );
    assert!(row("dead-letter-queue-prefix").ends_with("default"), "{table}");
    assert!(row("max-redelivery-delay").contains("derived"), "{table}");
}

#[tokio::test]
async fn config_resolve_shows_which_match_supplied_each_value() {
    let (_dir, path) = temp_file("rebound.toml", SETTINGS_TOML);
    let out = rebound([
        "config",
        "resolve",
        "--config",
        path.to_str().unwrap(),
        "--address",
        "orders.eu",
    ])
    .await;
    assert_settings_table(&out.success().stdout);
}

/// A config whose line 5 has a misspelt key.
const BROKEN_TOML: &str = r##"listen = "127.0.0.1:0"

[[address-settings]]
match = "#"
redelivery-dealy = 5
"##;

#[tokio::test]
async fn config_check_names_file_line_and_key() {
    let (_dir, path) = temp_file("broken.toml", BROKEN_TOML);
    let path = path.to_str().unwrap();
    let out = rebound(["config", "check", "--config", path]).await;
    out.failure(2);
    assert!(out.stderr.contains(&format!("{path}:5:")), "{}", out.stderr);
    assert!(out.stderr.contains("redelivery-dealy"), "{}", out.stderr);

    let (_dir, good) = temp_file("good.toml", SETTINGS_TOML);
    let ok = rebound(["config", "check", "--config", good.to_str().unwrap()]).await;
    assert_eq!(ok.success().stdout, "ok\n");
}

#[tokio::test]
async fn printed_default_config_checks_ok() {
    let printed = rebound(["config", "print-default"]).await;
    let (_dir, path) = temp_file("default.toml", &printed.success().stdout);
    let out = rebound(["config", "check", "--config", path.to_str().unwrap()]).await;
    assert_eq!(out.success().stdout, "ok\n");
}

#[tokio::test]
async fn serve_with_a_broken_config_fails_naming_the_line() {
    let (dir, path) = temp_file("broken.toml", BROKEN_TOML);
    let path = path.to_str().unwrap();
    let data = dir.path().join("data");
    let out = rebound([
        "serve",
        "--config",
        path,
        "--listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
    ])
    .await;
    assert!(!out.status.success(), "serve must refuse a broken config");
    assert!(out.stderr.contains(&format!("{path}:5:")), "{}", out.stderr);
    assert!(!out.stdout.contains("listening"), "{}", out.stdout);
}

/// `serve --worker-threads` sets how many threads serve clients; zero is a usage error.
#[tokio::test]
async fn serve_runs_the_worker_threads_asked_for() {
    let broker = Broker::start_custom("", "127.0.0.1:0", &["--worker-threads", "3"]).await;
    let tasks = std::fs::read_dir(format!("/proc/{}/task", broker.pid())).expect("list the broker's threads");
    let workers = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "tokio-rt-worker")
        .count();
    assert_eq!(workers, 3);
    create_queue(&broker, "threads").await;

    let out = rebound(["serve", "--worker-threads", "0"]).await;
    out.failure(2);
    assert!(out.stderr.contains("--worker-threads"), "{}", out.stderr);
}

#[tokio::test]
async fn unreachable_broker_is_one_error_line() {
    // Nothing listens on port 1.
    let out = rebound(["queue", "list", "--server", "127.0.0.1:1"]).await;
    out.failure(1);
    assert_eq!(
        out.stderr,
        "error: cannot connect to http://127.0.0.1:1: connection refused\n"
    );
}

#[tokio::test]
async fn bad_property_syntax_is_a_usage_error() {
    let out = rebound([
        "send",
        "--address",
        "a",
        "--property",
        "k:int=seven",
        "--server",
        "127.0.0.1:1",
    ])
    .await;
    out.failure(2);
    assert!(
        out.stderr.contains("'seven' is not a 64-bit integer"),
        "{}",
        out.stderr
    );
}

/// Each command's help lists the flags it uses: the connection flags of the
/// client commands are not the server's (`rebound serve --help`), and they may
/// still come before the subcommand.
#[tokio::test(flavor = "multi_thread")]
async fn each_command_shows_only_the_flags_it_uses() {
    let client_flags = [
        "--server",
        "--ca-cert",
        "--client-cert",
        "--client-key",
        "--user",
        "--password",
    ];
    for offline in [
        vec!["serve", "--help"],
        vec!["config", "check", "--help"],
        vec!["user", "hash-password", "--help"],
        vec!["tls", "dev-certs", "--help"],
    ] {
        let help = rebound(offline.clone()).await.stdout;
        let shown: Vec<&&str> = client_flags.iter().filter(|f| help.contains(**f)).collect();
        assert!(
            shown.is_empty(),
            "`rebound {}` shows {shown:?}",
            offline.join(" ")
        );
    }
    let help = rebound(["queue", "list", "--help"]).await.stdout;
    assert!(client_flags.iter().all(|f| help.contains(f)), "{help}");

    let broker = Broker::start().await;
    let before = rebound(["--server", &broker.url(), "queue", "list"]).await;
    assert!(before.status.success(), "{}", before.stderr);
    let misplaced = rebound(["--server", &broker.url(), "serve"]).await;
    assert!(!misplaced.status.success());
    assert!(misplaced.stderr.contains("--server"), "{}", misplaced.stderr);
}
