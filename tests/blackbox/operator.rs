//! What an operator or a newcomer reaches for first: the global `--server` flag,
//! shell completions, `address list` / `address stat`, paged queue listings,
//! `queue retry`'s progress and its count however it ends, `rebound perf`
//! deleting its queue when it fails or is interrupted, and the documented example
//! config (`config/examples/rebound.toml`).
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt as _;
use rebound_client::{Client, OutgoingMessage, RoutingType, Selection};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout};

use crate::messaging::receive;
use crate::support::{Broker, CliOutput, REBOUND, cli, json_keys, rebound, root};

/// One failed delivery dead-letters a message to `DLQ`; `events` is multicast.
const DLQ_CONFIG: &str = r##"
[[address-settings]]
match = "#"
max-delivery-attempts = 1
dead-letter-address = "DLQ"

[[addresses]]
name = "DLQ"
[[addresses.queues]]
name = "DLQ"
"##;

/// Runs `rebound ARGS` with `REBOUND_SERVER` set to `server`.
async fn rebound_with_server_env(server: &str, args: &[&str]) -> CliOutput {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(REBOUND)
            .args(args)
            .env("REBOUND_SERVER", server)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("rebound finishes")
    .expect("run rebound");
    CliOutput {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A CLI command running in the background, its stderr read line by line.
struct Running {
    child: Child,
    stdout: ChildStdout,
    stderr: Lines<BufReader<ChildStderr>>,
    /// The stderr lines read so far.
    seen: Vec<String>,
}

impl Running {
    fn start(broker: &Broker, args: &[&str]) -> Running {
        let mut child = tokio::process::Command::new(REBOUND)
            .args(args)
            .args(["--server", &broker.url()])
            .env_remove("REBOUND_SERVER")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn rebound");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = BufReader::new(child.stderr.take().expect("stderr is piped")).lines();
        Running {
            child,
            stdout,
            stderr,
            seen: Vec::new(),
        }
    }

    /// Reads stderr (bounded in time) until a line contains `needle`; returns it.
    async fn wait_for(&mut self, needle: &str) -> String {
        let found = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = self.stderr.next_line().await.expect("read stderr") {
                self.seen.push(line.clone());
                if line.contains(needle) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            _ => panic!("stderr never had {needle:?}; it had:\n{}", self.seen.join("\n")),
        }
    }

    /// Sends signal `name` (e.g. `INT`, as Ctrl-C does).
    fn signal(&self, name: &str) {
        let pid = self.child.id().expect("still running");
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name}");
    }

    /// Waits (bounded) for the command to exit; all of its output.
    async fn finish(mut self) -> CliOutput {
        let mut stdout = String::new();
        let mut rest = Vec::new();
        let read = async {
            let (out, err) = tokio::join!(self.stdout.read_to_string(&mut stdout), async {
                while let Some(line) = self.stderr.next_line().await? {
                    rest.push(line);
                }
                std::io::Result::Ok(())
            });
            out.and(err)?;
            self.child.wait().await
        };
        let status = tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("the command exits")
            .expect("reap the command");
        self.seen.extend(rest);
        let mut stderr = self.seen.join("\n");
        stderr.push('\n');
        CliOutput {
            status,
            stdout,
            stderr,
        }
    }
}

/// Sends `n` messages to `orders` and fails each once: `n` dead letters on `DLQ`.
async fn dead_letters(client: &Client, n: usize) {
    let batch = (0..n)
        .map(|i| OutgoingMessage::new("orders", format!("m{i}")))
        .collect();
    client.send_batch(batch).await.unwrap();
    let mut c = client.consume("orders", n as u32).await.unwrap();
    let got = receive(&mut c, n, Duration::from_secs(10)).await;
    let ids: Vec<u64> = got.iter().map(|d| d.id).collect();
    assert_eq!(ids.len(), n);
    c.nack(&ids, "poisoned").await.unwrap();
    c.flush().await.unwrap();
    c.close().await.unwrap();
    assert_eq!(client.queue("DLQ").await.unwrap().messages, n as u64);
}

/// Whatever `rebound perf` named `perf.*` that still exists.
async fn perf_leftovers(client: &Client) -> Vec<String> {
    let queues = client.list_queues().await.unwrap().into_iter().map(|q| q.name);
    let addresses = client.list_addresses().await.unwrap().into_iter().map(|a| a.name);
    queues
        .chain(addresses)
        .filter(|name| name.contains("perf."))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn server_flag_goes_before_or_after_the_subcommand_and_beats_the_environment() {
    let broker = Broker::start().await;
    let url = broker.url();
    for args in [
        vec!["--server", &url, "queue", "list"],
        vec!["queue", "list", "--server", &url],
        vec!["queue", "--server", &url, "list"],
    ] {
        let out = rebound(&args).await;
        assert!(
            out.success().stdout.starts_with("NAME"),
            "{args:?}: {}",
            out.stdout
        );
    }
    let from_env = rebound_with_server_env(&url, &["queue", "list"]).await;
    assert!(from_env.success().stdout.contains("DLQ"));
    let nobody = "http://127.0.0.1:1";
    let flag_first = rebound_with_server_env(nobody, &["--server", &url, "queue", "list"]).await;
    assert!(flag_first.success().stdout.contains("DLQ"));
    rebound_with_server_env(nobody, &["queue", "list"])
        .await
        .failure(1);
    let help = rebound(["--help"]).await;
    assert!(
        help.success().stdout.contains("--server <URL>"),
        "{}",
        help.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn completions_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete -F _rebound"),
        ("zsh", "#compdef rebound"),
        ("fish", "complete -c rebound"),
    ] {
        let out = rebound(["completions", shell]).await;
        let script = &out.success().stdout;
        assert!(script.contains(marker), "{shell}: no {marker:?}");
        for word in ["queue", "retry", "address", "completions", "server"] {
            assert!(script.contains(word), "{shell}: no {word:?}");
        }
    }
    // The bash script loads and registers the completion.
    let (_dir, path) =
        crate::support::temp_file("rebound.bash", &rebound(["completions", "bash"]).await.stdout);
    let loaded = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(format!("source '{}' && complete -p rebound", path.display()))
        .output()
        .await
        .expect("run bash");
    assert!(
        loaded.status.success() && String::from_utf8_lossy(&loaded.stdout).contains("rebound"),
        "{loaded:?}"
    );
    rebound(["completions", "tcsh"]).await.failure(2);
}

#[tokio::test(flavor = "multi_thread")]
async fn address_list_and_stat_show_routing_types_queues_and_totals() {
    let broker = Broker::start_with_config(
        r#"
[[addresses]]
name = "events"
routing-type = "multicast"
  [[addresses.queues]]
  name = "billing"
  [[addresses.queues]]
  name = "audit"
"#,
    )
    .await;
    let client = broker.client().await;
    for body in ["e1", "e2"] {
        client.send(OutgoingMessage::new("events", body)).await.unwrap();
    }
    client.send(OutgoingMessage::new("orders", "o1")).await.unwrap();
    client
        .create_queue("events", "worker", RoutingType::Anycast, true)
        .await
        .unwrap();

    let table = cli(&broker, ["address", "list"]).await;
    let rows: Vec<Vec<&str>> = table
        .success()
        .stdout
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "ROUTING-TYPES",
            "AUTO-CREATED",
            "QUEUES",
            "MESSAGES",
            "DELIVERING",
            "SCHEDULED",
            "CONSUMERS",
            "BYTES",
            "MAX-SIZE-BYTES",
            "FULL-POLICY",
            "BLOCKED",
            "DROPPED"
        ]
    );
    assert_eq!(rows.len(), 3, "{}", table.stdout);
    assert_eq!(
        rows[1][..8],
        ["events", "anycast,multicast", "false", "3", "4", "0", "0", "0"]
    );
    assert_eq!(
        rows[2][..8],
        ["orders", "anycast", "true", "1", "1", "0", "0", "0"]
    );

    let json = cli(&broker, ["address", "list", "--json"]).await;
    let first = json.success().stdout.lines().next().unwrap();
    assert_eq!(
        json_keys(first),
        [
            "name",
            "routing_types",
            "auto_created",
            "queues",
            "messages",
            "delivering",
            "scheduled",
            "consumers",
            "bytes",
            "max_size_bytes",
            "address_full_policy",
            "blocked_sends",
            "dropped_messages"
        ]
    );
    let events = &json.json_lines()[0];
    assert_eq!(
        events["queues"],
        serde_json::json!(["audit", "billing", "worker"])
    );
    assert_eq!(
        events["routing_types"],
        serde_json::json!(["anycast", "multicast"])
    );
    assert!(events["bytes"].as_u64().unwrap() > 0);

    let stat = cli(&broker, ["address", "stat", "--name", "events"]).await;
    let lines: Vec<&str> = stat.success().stdout.lines().collect();
    assert_eq!(
        lines[..5],
        [
            "name: events",
            "routing_types: anycast, multicast",
            "auto_created: false",
            "queues: audit, billing, worker",
            "messages: 4",
        ]
    );
    let stat = cli(&broker, ["address", "stat", "--name", "orders", "--json"]).await;
    let orders: Value = serde_json::from_str(stat.success().stdout.trim()).unwrap();
    assert_eq!(
        (orders["auto_created"].as_bool(), orders["messages"].as_u64()),
        (Some(true), Some(1))
    );

    let unknown = cli(&broker, ["address", "stat", "--name", "nowhere"]).await;
    unknown.failure(1);
    let stderr = unknown.stderr.trim_end();
    assert!(
        !stderr.contains('\n') && stderr.starts_with("error: ") && stderr.contains("nowhere"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn list_queues_comes_in_bounded_pages_that_cover_every_queue() {
    const QUEUES: usize = 2500;
    let broker = Broker::start().await;
    let client = broker.client().await;
    // Non-durable queues on one address: no commit each, so they are quick to make.
    let created: Vec<_> = futures::stream::iter(0..QUEUES)
        .map(|i| {
            let client = client.clone();
            async move {
                client
                    .create_queue("paged", &format!("paged.{i:05}"), RoutingType::Anycast, false)
                    .await
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(created.iter().all(Result::is_ok));
    let expected = QUEUES + 2; // and the default config's DLQ and ExpiryQueue

    let first = client.list_queues_page(0, "").await.unwrap();
    assert_eq!(first.queues.len(), 1000, "the default page size");
    assert_eq!(first.next_page_token, first.queues[999].name);
    let capped = client.list_queues_page(50_000, "").await.unwrap();
    assert_eq!(capped.queues.len(), 1000, "1000 at most");
    let small = client.list_queues_page(7, "").await.unwrap();
    assert_eq!(small.queues.len(), 7);

    let (mut names, mut token, mut pages) = (Vec::new(), String::new(), 0);
    loop {
        let page = client.list_queues_page(0, &token).await.unwrap();
        assert!(page.queues.len() <= 1000);
        names.extend(page.queues.into_iter().map(|q| q.name));
        pages += 1;
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(pages, 3);
    assert_eq!(names.len(), expected);
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");

    let all = client.list_queues().await.unwrap();
    assert_eq!(
        all.iter().map(|q| &q.name).collect::<Vec<_>>(),
        names.iter().collect::<Vec<_>>()
    );
    let listed = cli(&broker, ["queue", "list", "--json"]).await;
    assert_eq!(listed.success().json_lines().len(), expected);

    // Addresses page the same way.
    let (mut addresses, mut token) = (Vec::new(), String::new());
    loop {
        let page = client.list_addresses_page(1, &token).await.unwrap();
        assert!(page.addresses.len() <= 1);
        addresses.extend(page.addresses.into_iter().map(|a| a.name));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(addresses, ["DLQ", "ExpiryQueue", "paged"]);
    let paged = client.address("paged").await.unwrap();
    assert_eq!(paged.queues.len(), QUEUES);
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_retry_goes_in_chunks_printing_progress_and_one_final_count() {
    let broker = Broker::start_with_config(DLQ_CONFIG).await;
    let client = broker.client().await;
    dead_letters(&client, 25).await;
    client
        .send(OutgoingMessage::new("DLQ", "not a dead letter"))
        .await
        .unwrap();

    let out = cli(&broker, ["queue", "retry", "--queue", "DLQ", "--chunk", "10"]).await;
    let stays = client.browse("DLQ", 10).await.unwrap();
    assert_eq!(stays.len(), 1, "only the message that is no dead letter stays");
    let id = stays[0].message.message_id;
    assert_eq!(
        out.success().stdout,
        format!(
            "moved 25 messages from DLQ, skipped 1\n#{id} skipped: not a dead letter: it has no \
             _AMQ_ORIG_ADDRESS/_AMQ_ORIG_QUEUE\n"
        )
    );
    assert_eq!(
        out.stderr.lines().collect::<Vec<_>>(),
        [
            "retried 10 of 26 messages from DLQ (0 skipped)",
            "retried 20 of 26 messages from DLQ (0 skipped)",
            "retried 25 of 26 messages from DLQ (1 skipped)",
        ]
    );
    assert_eq!(client.queue("orders").await.unwrap().messages, 25);

    // The skipped message, reported by each call, is counted once in the JSON too.
    let json = cli(
        &broker,
        ["queue", "retry", "--queue", "DLQ", "--chunk", "1", "--json"],
    )
    .await;
    let report: Value = serde_json::from_str(json.success().stdout.trim()).unwrap();
    assert_eq!(
        (report["moved"].as_u64(), report["skipped"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(report["outcomes"].as_array().unwrap().len(), 1);
}

/// The number N in an `... retried N of ...` line.
fn retried_count(line: &str) -> u64 {
    let after = line.split("retried ").nth(1).expect("a retried count");
    after.split(' ').next().unwrap().parse().expect("a number")
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_retry_cut_off_by_a_broker_crash_says_how_many_it_retried() {
    let mut broker = Broker::start_with_config(DLQ_CONFIG).await;
    dead_letters(&broker.client().await, 100).await;

    // 20 a second, 5 a call: the crash lands early in the 5 s the retry would take.
    let mut retry = Running::start(
        &broker,
        &["queue", "retry", "--queue", "DLQ", "--rate", "20", "--chunk", "5"],
    );
    retry.wait_for("retried 10 of 100").await;
    broker.kill9();
    let out = retry.finish().await;
    out.failure(1);
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("error: retried ")
            && last.contains(
                " of 100 messages from DLQ before this error; the call under way may have moved up to 5 more"
            ),
        "{}",
        out.stderr
    );
    let reported = retried_count(last);
    assert!((10..100).contains(&reported), "{last}");

    broker.restart().await;
    let client = broker.client().await;
    let back = client.queue("orders").await.unwrap().messages;
    let left = client.queue("DLQ").await.unwrap().messages;
    assert_eq!(back + left, 100, "every message in exactly one queue");
    assert!(
        (reported..=reported + 5).contains(&back),
        "reported {reported}, {back} are back on orders"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_retry_interrupted_by_ctrl_c_finishes_its_chunk_and_reports_it() {
    let broker = Broker::start_with_config(DLQ_CONFIG).await;
    let client = broker.client().await;
    dead_letters(&client, 100).await;

    let mut retry = Running::start(
        &broker,
        &["queue", "retry", "--queue", "DLQ", "--rate", "20", "--chunk", "5"],
    );
    retry.wait_for("retried 5 of 100").await;
    retry.signal("INT");
    let out = retry.finish().await;
    out.failure(1);
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("error: interrupted: retried ") && last.ends_with(" of 100 messages from DLQ"),
        "{}",
        out.stderr
    );
    let moved = retried_count(last);
    assert!(
        moved.is_multiple_of(5) && (5..100).contains(&moved),
        "a whole number of chunks: {last}"
    );
    assert_eq!(
        out.stdout,
        format!("moved {moved} messages from DLQ, skipped 0\n")
    );
    assert_eq!(
        client.count_messages(&Selection::new("DLQ")).await.unwrap(),
        100 - moved
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn perf_that_fails_deletes_its_queue_and_address() {
    // Every perf message is too large: the producers fail at once.
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "perf.#"
max-message-size = 100
"##,
    )
    .await;
    let out = cli(
        &broker,
        [
            "perf",
            "--workload",
            "durable",
            "--messages",
            "200",
            "--size",
            "1024",
        ],
    )
    .await;
    out.failure(1);
    assert!(out.stderr.contains("the run failed"), "{}", out.stderr);
    assert!(
        out.stderr.contains("deleting queue perf.durable."),
        "{}",
        out.stderr
    );
    assert_eq!(perf_leftovers(&broker.client().await).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn perf_interrupted_by_ctrl_c_deletes_its_queue_and_address() {
    let broker = Broker::start().await;
    let mut perf = Running::start(
        &broker,
        &[
            "perf",
            "--workload",
            "durable",
            "--messages",
            "10000000",
            "--size",
            "16",
        ],
    );
    let started = perf.wait_for("perf: workload durable on queue ").await;
    let queue = started.rsplit(' ').next().unwrap().to_owned();
    perf.wait_for("sent").await; // the load runs
    let client = broker.client().await;
    assert!(client.queue(&queue).await.is_ok());
    perf.signal("INT");
    let out = perf.finish().await;
    out.failure(1);
    assert!(out.stderr.contains("interrupted"), "{}", out.stderr);
    assert_eq!(
        perf_leftovers(&client).await,
        Vec::<String>::new(),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_example_config_is_the_documented_one_and_a_broker_runs_on_it() {
    let root = root();
    let docs = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let path = root.join("config/examples/rebound.toml");
    let example = std::fs::read_to_string(&path).unwrap();
    let fence = "```toml\n";
    let start = docs
        .find(&format!("{fence}{}", example.lines().next().unwrap()))
        .expect("docs/configuration.md shows the example config")
        + fence.len();
    let end = start + docs[start..].find("```").unwrap();
    assert_eq!(
        &docs[start..end],
        example,
        "docs/configuration.md and config/examples/rebound.toml differ"
    );

    let path = path.to_str().unwrap();
    assert_eq!(
        rebound(["config", "check", "--config", path])
            .await
            .success()
            .stdout,
        "ok\n"
    );
    let resolved = rebound(["config", "resolve", "--config", path, "--address", "orders.eu"]).await;
    let attempts = resolved
        .success()
        .stdout
        .lines()
        .find(|l| l.starts_with("max-delivery-attempts"))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>();
    assert_eq!(attempts[1], "3", "{}", resolved.stdout);

    let broker = Broker::start_with_config(&example).await;
    let events = broker.client().await.address("events").await.unwrap();
    assert_eq!(events.queues, ["audit", "billing"]);
    assert_eq!(
        events.routing_types().collect::<Vec<_>>(),
        [RoutingType::Multicast]
    );
}
