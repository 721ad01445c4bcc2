//! A hostile client (issue 13): what it sends must not forge the broker's log
//! lines or drive the terminal of whoever looks at its messages, and an
//! `https://` URL must never be dialled in plaintext, and no name may pass for
//! another.
use rebound_client::{Code, OutgoingMessage};

use crate::redelivery::next;
use crate::support::{Broker, cli, rebound};

const WITH_DLQ: &str = r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
"##;

/// Text that would clear the screen, retitle the terminal and ring its bell.
const TERMINAL_ATTACK: &str = "\x1b[2J\x1b]0;pwned\x07";

/// No raw control character but the line ends; the escapes are visible instead.
fn assert_escaped(output: &str) {
    assert!(
        !output.chars().any(|c| c.is_control() && c != '\n'),
        "raw control characters in {output:?}"
    );
    assert!(output.contains("\\u{1b}[2J\\u{1b}]0;pwned\\u{7}"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn https_is_refused_rather_than_sent_in_plaintext() {
    let out = rebound(["--server", "https://127.0.0.1:1", "queue", "list"]).await;
    out.failure(1);
    assert!(
        out.stderr
            .starts_with("error: TLS needs the CA certificate that signed the broker's: give --ca-cert FILE"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failure_reason_cannot_forge_a_log_line() {
    let broker = Broker::start_with_config(WITH_DLQ).await;
    let client = broker.client().await;
    client
        .send(OutgoingMessage::new("orders", "poison"))
        .await
        .unwrap();
    let mut consumer = client.consume("orders", 1).await.unwrap();
    let d = next(&mut consumer).await;
    let reason = format!("ok\nFAKE ERROR line{TERMINAL_ATTACK}\r\nFAKE again");
    consumer.dead_letter(&[d.id], &reason).await.unwrap();
    consumer.flush().await.unwrap();

    let log = broker.wait_for_log("moved message").await;
    assert!(!log.lines().any(|l| l.starts_with("FAKE")), "{log}");
    assert_escaped(&log);
    assert!(log.contains("ok\\nFAKE ERROR line"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn received_and_browsed_messages_cannot_drive_the_terminal() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    for queue in ["browsed", "received"] {
        client
            .send(OutgoingMessage::new(queue, TERMINAL_ATTACK).property(TERMINAL_ATTACK, TERMINAL_ATTACK))
            .await
            .unwrap();
    }

    let out = cli(&broker, ["queue", "browse", "--queue", "browsed"]).await;
    assert_escaped(&out.success().stdout);
    assert_eq!(
        out.stdout.matches("\\u{1b}[2J").count(),
        3,
        "body, key, value: {}",
        out.stdout
    );
    let out = cli(&broker, ["receive", "--queue", "received"]).await;
    assert_escaped(&out.success().stdout);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn names_that_look_like_others_are_refused() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    client.send(OutgoingMessage::new("DLQ", "kept")).await.unwrap();

    // `DLQ` and a zero-width space; a right-to-left override that shows `DLQ.txt`
    // as `DLQ.` + `txt` reversed.
    for (name, code) in [
        ("DLQ\u{200B}", "U+200B at byte 3"),
        ("DLQ.\u{202E}txt", "U+202E at byte 4"),
    ] {
        let out = cli(&broker, ["address", "create", "--name", name]).await;
        out.failure(1);
        assert!(
            out.stderr
                .contains("must not contain invisible or bidirectional format characters")
                && out.stderr.contains(code),
            "{}",
            out.stderr
        );
        let out = cli(&broker, ["queue", "create", "--address", "DLQ", "--queue", name]).await;
        out.failure(1);
        assert!(out.stderr.contains(code), "{}", out.stderr);

        let err = client.send(OutgoingMessage::new(name, "x")).await.unwrap_err();
        assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
        assert!(err.to_string().contains(code), "{err}");
        let err = client.consumer(name).open().await.unwrap_err();
        assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    }
    // Nothing was made, and what was there is untouched.
    let addresses = client.list_addresses().await.unwrap();
    assert!(addresses.iter().all(|a| a.name.is_ascii()), "{addresses:?}");
    assert_eq!(client.queue("DLQ").await.unwrap().messages, 1);
}
