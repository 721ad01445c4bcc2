//! One truth about a config: `rebound config check`, `serve` and a reload run the
//! same validation, refuse with file:line:column and key what the broker could not
//! carry out, and a reload is applied whole or not at all. Creating an address or
//! queue that exists says what differs instead of pretending to have created it.
use std::path::Path;

use rebound_client::{Client, RoutingType};

use crate::support::{Broker, CliOutput, cli, rebound, temp_file};

/// `rebound config check` on `toml`, and `serve` with it: both must refuse it with
/// exit code 2 and the same `error: <file>:<line>:<column>: <key>: ...` line, which
/// starts with `at` (`line:column: key`).
async fn refused_alike(toml: &str, at: &str) {
    let (dir, path) = temp_file("rebound.toml", toml);
    let file = path.to_str().unwrap();
    let check = rebound(["config", "check", "--config", file]).await;
    check.failure(2);
    let line = check.stderr.trim_end();
    assert!(
        line.starts_with(&format!("error: {file}:{at}")),
        "config check: {line}\nexpected: {file}:{at}"
    );
    let serve = serve(&path, &dir.path().join("data")).await;
    serve.failure(2);
    assert!(
        serve.stderr.contains(line),
        "serve says:\n{}\ncheck says:\n{line}",
        serve.stderr
    );
    assert!(!serve.stdout.contains("listening"), "{}", serve.stdout);
}

async fn serve(config: &Path, data: &Path) -> CliOutput {
    rebound([
        "serve".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--http-listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ])
    .await
}

/// One `[[address-settings]]` entry for every address, with `body` on line 3.
fn settings(body: &str) -> String {
    format!("[[address-settings]]\nmatch = \"#\"\n{body}\n")
}

/// An address `a` with a queue `q` whose filter, on line 5, is `filter`.
fn queue_filter(filter: &str) -> String {
    format!("[[addresses]]\nname = \"a\"\n[[addresses.queues]]\nname = \"q\"\nfilter = \"{filter}\"\n")
}

/// A dead-letter address or a move target the broker cannot create would drop
/// every poison message; such a config does not load.
#[tokio::test]
async fn names_that_would_drop_poison_messages_are_refused_at_load() {
    refused_alike(
        &settings("dead-letter-address = \"has space\""),
        "3:23: address-settings[0].dead-letter-address: address name \"has space\"",
    )
    .await;
    refused_alike(
        &settings("expiry-address = \"tab\\there\""),
        "3:18: address-settings[0].expiry-address: address name",
    )
    .await;
    refused_alike(
        &settings("redelivery-schedule = \"2:move(queue:bad name$)\""),
        "3:23: address-settings[0].redelivery-schedule: invalid schedule: entry 1 `2:move(queue:bad name$)`: the move target `bad name$`",
    )
    .await;
}

/// What `serve` refused without a location, and `config check` passed as `ok`.
#[tokio::test]
async fn config_check_and_serve_refuse_the_same_files_naming_the_spot() {
    refused_alike(
        &queue_filter("a = = 1"),
        "5:10: addresses[0].queues[0].filter: invalid filter:",
    )
    .await;
    refused_alike(
        "[[addresses]]\nname = \"a b\"\n",
        "2:8: addresses[0].name: address name \"a b\" must not contain whitespace",
    )
    .await;
    refused_alike(
        &format!("[[addresses]]\nname = \"{}\"\n", "n".repeat(10 * 1024)),
        "2:8: addresses[0].name: address name",
    )
    .await;
    refused_alike(
        &settings("max-message-size = 99999999999"),
        "3:20: address-settings[0].max-message-size: must be at most 16711680 bytes",
    )
    .await;
}

/// What `serve` refuses of a file before it opens anything, `config check`
/// refuses too, with the same message and exit code: a listen address others can
/// reach without users (2, a config error), a cluster without PostgreSQL (1).
#[tokio::test]
async fn config_check_refuses_what_serve_refuses_before_opening_anything() {
    let cases = [
        ("listen = \"0.0.0.0:0\"\n", 2, "(`listen`) without [[users]]"),
        (
            "listen = \"127.0.0.1:0\"\nhttp-listen = \"\"\n[cluster]\nnode-id = \"n1\"\n",
            1,
            "needs storage = \"postgres\"",
        ),
    ];
    for (toml, code, says) in cases {
        let (dir, path) = temp_file("rebound.toml", toml);
        let data = dir.path().join("data");
        let serve = rebound([
            "serve".as_ref(),
            "--config".as_ref(),
            path.as_os_str(),
            "--data-dir".as_ref(),
            data.as_os_str(),
        ])
        .await;
        serve.failure(code);
        assert!(!data.exists(), "serve opened nothing");
        let error = serve.stderr.lines().find(|l| l.starts_with("error: ")).unwrap();
        assert!(error.contains(says), "{error}");
        let check = rebound([
            "config".as_ref(),
            "check".as_ref(),
            "--config".as_ref(),
            path.as_os_str(),
        ])
        .await;
        check.failure(code);
        assert_eq!(check.stderr.trim_end(), error, "config check of {toml:?}");
    }
}

/// A selector nested 10,000 deep is an error at load, not a stack overflow.
#[tokio::test]
async fn a_10000_deep_filter_is_refused_by_check_and_serve_alike() {
    let deep = format!("{}a = 1{}", "(".repeat(10_000), ")".repeat(10_000));
    refused_alike(
        &queue_filter(&deep),
        "5:10: addresses[0].queues[0].filter: invalid filter:",
    )
    .await;
}

/// The effective value of `key` for `address`, as the running broker reports it.
async fn setting(client: &Client, address: &str, key: &str) -> String {
    let settings = client.settings(address).await.unwrap();
    settings.into_iter().find(|s| s.key == key).unwrap().value
}

/// Waits (bounded) for the `n`-th log line containing `needle`, and returns it.
async fn nth_line(broker: &Broker, needle: &str, n: usize) -> String {
    for _ in 0..200 {
        if let Some(line) = broker.log().lines().filter(|l| l.contains(needle)).nth(n - 1) {
            return line.to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no log line #{n} with {needle:?}; log:\n{}", broker.log());
}

const FIVE_ATTEMPTS: &str = "[[address-settings]]\nmatch = \"#\"\nmax-delivery-attempts = 5\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_reload_changes_nothing() {
    let broker = Broker::start_with_config(FIVE_ATTEMPTS).await;
    let client = broker.client().await;
    let attempts = "max-delivery-attempts";
    assert_eq!(setting(&client, "orders", attempts).await, "5");
    let rejected = "config reload rejected";
    let file = broker.dir().join("rebound.toml");

    // A new value and a queue whose filter (line 9) does not parse.
    let two = FIVE_ATTEMPTS.replace("= 5", "= 2");
    broker.rewrite_config(&format!(
        "{two}\n[[addresses]]\nname = \"new\"\n[[addresses.queues]]\nname = \"new\"\nfilter = \"a = = 1\"\n"
    ));
    broker.hup();
    let line = nth_line(&broker, rejected, 1).await;
    assert!(
        line.contains(&format!("{}:9:10: addresses[0].queues[0].filter", file.display())),
        "{line}"
    );
    assert_eq!(setting(&client, "orders", attempts).await, "5", "nothing applied");

    // A valid file that declares a queue which exists on another address.
    client
        .create_queue("a", "taken", RoutingType::Anycast, true)
        .await
        .unwrap();
    broker.rewrite_config(&format!(
        "{two}\n[[addresses]]\nname = \"b\"\n[[addresses.queues]]\nname = \"taken\"\n"
    ));
    broker.hup();
    let line = nth_line(&broker, rejected, 2).await;
    assert!(
        line.contains(&file.display().to_string())
            && line.contains("queue 'taken' already exists with address 'a', not 'b'"),
        "{line}"
    );
    assert_eq!(setting(&client, "orders", attempts).await, "5", "nothing applied");
    assert!(
        client.create_address("b", RoutingType::Anycast).await.unwrap(),
        "the rejected reload did not create address b"
    );
    assert!(!broker.log().contains("applying the reloaded config failed"));

    // The same change without the conflict applies.
    broker.rewrite_config(&two);
    broker.hup();
    broker.wait_for_log("config reloaded").await;
    assert_eq!(setting(&client, "orders", attempts).await, "2");
}

#[tokio::test(flavor = "multi_thread")]
async fn creating_what_exists_is_a_no_op_only_when_it_is_the_same() {
    let broker = Broker::start().await;
    let create = |routing: &'static str| {
        let broker = &broker;
        async move {
            cli(
                broker,
                ["address", "create", "--name", "mc", "--routing-type", routing],
            )
            .await
        }
    };
    assert_eq!(create("anycast").await.success().stdout, "created address mc\n");
    let same = create("anycast").await;
    assert_eq!(same.success().stdout, "address mc exists already\n");

    let other = create("multicast").await;
    other.failure(1);
    assert_eq!(other.stdout, "");
    assert!(
        other
            .stderr
            .contains("address 'mc' already exists with routing type anycast, not multicast")
            && other.stderr.contains("(ALREADY_EXISTS)"),
        "{}",
        other.stderr
    );

    let queue = |args: &'static [&'static str]| {
        let broker = &broker;
        async move { cli(broker, [&["queue", "create"][..], args].concat()).await }
    };
    queue(&["--address", "mc", "--queue", "q"]).await.success();
    let elsewhere = queue(&["--address", "elsewhere", "--queue", "q", "--non-durable"]).await;
    elsewhere.failure(1);
    assert!(
        elsewhere
            .stderr
            .contains("queue 'q' already exists with address 'mc', not 'elsewhere'; durable true, not false")
            && elsewhere.stderr.contains("(ALREADY_EXISTS)"),
        "{}",
        elsewhere.stderr
    );
    let same = queue(&["--address", "mc", "--queue", "q"]).await;
    assert!(
        same.failure(1)
            .stderr
            .contains("queue 'q' already exists (ALREADY_EXISTS)"),
        "{}",
        same.stderr
    );
    let client = broker.client().await;
    assert!(
        client
            .create_address("elsewhere", RoutingType::Anycast)
            .await
            .unwrap(),
        "the refused queue left no address behind"
    );
}
