//! The web console end to end in a real browser: headless Chromium driven by
//! Playwright (`tests/e2e/console.py`) finds a queue, browses a message, opens the
//! dead letters of the poisoned queue, previews a retry and confirms it; this test
//! then checks over gRPC that the messages are back on their original queue.
//! The broker has users: the browser logs in with HTTP basic as `admin`.
//!
//! It needs `chromium` (Debian's package; `REBOUND_CHROMIUM` names another) and
//! Python's `playwright` module; `.ci/run` installs both. Without them it fails
//! under `CI=true` and is skipped elsewhere. With `REBOUND_SCREENSHOT` set it saves
//! the dead-letter page to `docs/console-dead-letters.png`.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rebound_client::{Client, OutgoingMessage};

use crate::console::poison;
use crate::permissions::{PASSWORD, login};
use crate::redelivery::next;
use crate::support::Broker;

/// How long the browser may take for the whole walk.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_owned()
}

/// Why the browser test cannot run here, if it cannot.
async fn missing_tools() -> Option<String> {
    let chromium = std::env::var("REBOUND_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        return Some(format!(
            "no Chromium at {chromium} (apt-get install chromium, or set REBOUND_CHROMIUM)"
        ));
    }
    let playwright = tokio::process::Command::new("python3")
        .args(["-c", "import playwright"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    match playwright {
        Ok(status) if status.success() => None,
        _ => Some("python3 with the playwright module is missing (pip install playwright)".into()),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_retries_dead_letters_from_the_browser() {
    if let Some(reason) = missing_tools().await {
        return crate::support::skipped(&reason);
    }
    let broker = Broker::start_with_config(&crate::console_security::config()).await;
    let client = login(&broker, "admin").await;
    poison(
        &client,
        "orders",
        &["order 1041", "order 1042", "order 1043"],
        "db down: connection refused",
    )
    .await;
    poison(&client, "orders", &["order 1044"], "timeout after 30 s").await;
    poison(&client, "billing", &["invoice 77"], "card declined").await;
    // One that its consumer rejects outright: it dies at once, with its reason.
    client
        .send(OutgoingMessage::new("orders", "order 1040"))
        .await
        .unwrap();
    let mut consumer = client.consume("orders", 1).await.unwrap();
    let d = next(&mut consumer).await;
    consumer
        .dead_letter(&[d.id], "invalid JSON at line 1")
        .await
        .unwrap();
    consumer.close().await.unwrap();
    client
        .send(OutgoingMessage::new("orders", "order 1045").property("customer", "acme"))
        .await
        .unwrap();

    let screenshot =
        std::env::var_os("REBOUND_SCREENSHOT").map(|_| root().join("docs/console-dead-letters.png"));
    let mut command = tokio::process::Command::new("python3");
    command
        .arg(root().join("tests/e2e/console.py"))
        .args([
            broker.http_url().await.as_str(),
            "orders",
            "DLQ.orders",
            "order 1045",
            "db down: connection refused",
        ])
        .args(screenshot.iter())
        .env("REBOUND_CONSOLE_USER", "admin")
        .env("REBOUND_CONSOLE_PASSWORD", PASSWORD)
        .kill_on_drop(true);
    let output = tokio::time::timeout(BROWSER_TIMEOUT, command.output())
        .await
        .expect("the browser walk timed out")
        .expect("run python3");
    assert!(
        output.status.success(),
        "the browser walk failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    // The three retried messages are back on orders, the other dead letters stayed.
    assert_eq!(
        bodies(&client, "orders").await,
        ["order 1041", "order 1042", "order 1043", "order 1045"]
    );
    assert_eq!(bodies(&client, "DLQ.orders").await, ["order 1040", "order 1044"]);
}

/// The bodies of a queue's messages, sorted.
async fn bodies(client: &Client, queue: &str) -> Vec<String> {
    let mut bodies: Vec<String> = client
        .browse(queue, 0)
        .await
        .unwrap()
        .iter()
        .map(|b| String::from_utf8_lossy(&b.message.body).into_owned())
        .collect();
    bodies.sort();
    bodies
}
