//! The HTTP endpoint: health probes and Prometheus metrics, as an operator's
//! tools see them.
use std::time::Duration;

use rebound_client::{Client, OutgoingMessage};

use crate::support::{Broker, http_get, sample};

#[tokio::test]
async fn health_probes_answer_once_serving() {
    let broker = Broker::start().await;
    let http = broker.http_url().await;
    assert_eq!(
        http_get(&format!("{http}/health/live")).await,
        (200, "live\n".into())
    );
    assert_eq!(
        http_get(&format!("{http}/health/ready")).await,
        (200, "ready\n".into())
    );
    assert_eq!(http_get(&format!("{http}/nothing")).await.0, 404);
}

#[tokio::test]
async fn an_empty_http_listen_turns_the_endpoint_off() {
    let broker = Broker::start_with_config("http-listen = \"\"\n").await;
    // The gRPC side serves; no HTTP line follows the listening line.
    let _client = broker.client().await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!broker.http_listening(), "{}", broker.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_follow_sends_nacks_and_dead_letters() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "#"
max-delivery-attempts = 2
dead-letter-address = "DLQ"

[[addresses]]
name = "DLQ"
[[addresses.queues]]
name = "DLQ"
"##,
    )
    .await;
    let orders = [
        ("address", "orders"),
        ("queue", "orders"),
        ("routing_type", "anycast"),
    ];
    let dlq = [("queue", "DLQ")];
    let text = broker.scrape().await;
    assert_eq!(
        sample(&text, "rebound_queue_messages", &orders),
        None,
        "no queue yet"
    );
    assert_eq!(sample(&text, "rebound_queue_messages", &dlq), Some(0.0));
    assert_eq!(
        sample(
            &text,
            "rebound_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    let commits_before = sample(&text, "rebound_store_commits_total", &[]).unwrap();

    let client = broker.client().await;
    for body in ["poison", "good 1", "good 2"] {
        client.send(OutgoingMessage::new("orders", body)).await.unwrap();
    }
    let text = broker.scrape().await;
    assert_eq!(
        sample(&text, "rebound_queue_messages", &orders),
        Some(3.0),
        "{text}"
    );
    assert_eq!(sample(&text, "rebound_queue_added_total", &orders), Some(3.0));
    assert!(sample(&text, "rebound_queue_bytes", &orders).unwrap() > 0.0);
    assert!(sample(&text, "rebound_store_commits_total", &[]).unwrap() >= commits_before + 3.0);
    assert!(sample(&text, "rebound_store_fsyncs_total", &[]).unwrap() > 0.0);
    assert!(sample(&text, "rebound_connections", &[]).unwrap() >= 1.0);

    // The poison message is nacked twice (redelivered once, then dead-lettered);
    // the other two are acknowledged.
    let mut consumer = client.consume("orders", 10).await.unwrap();
    let mut nacks = 0;
    let mut acks = 0;
    while nacks < 2 || acks < 2 {
        let d = consumer
            .next_timeout(Duration::from_secs(10))
            .await
            .unwrap()
            .expect("a delivery");
        if d.message.body.as_ref() == b"poison" {
            consumer.nack(&[d.id], "boom").await.unwrap();
            nacks += 1;
        } else {
            consumer.ack(&[d.id]).await.unwrap();
            acks += 1;
        }
    }
    // Settles are answered before the queue's counters are read: poll briefly.
    let mut text = String::new();
    for _ in 0..50 {
        text = broker.scrape().await;
        if sample(&text, "rebound_queue_messages", &dlq) == Some(1.0)
            && sample(&text, "rebound_queue_acked_total", &orders) == Some(2.0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        sample(&text, "rebound_queue_messages", &orders),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rebound_queue_acked_total", &orders),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rebound_queue_redelivered_total", &orders),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rebound_queue_dead_lettered_total", &orders),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rebound_queue_consumers", &orders),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "rebound_queue_messages", &dlq), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "rebound_queue_added_total", &dlq),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "rebound_consume_streams", &[]), Some(1.0), "{text}");
    // Three first deliveries, each measured from its send.
    assert_eq!(
        sample(&text, "rebound_delivery_latency_seconds_count", &[]),
        Some(3.0),
        "{text}"
    );
    assert!(sample(&text, "rebound_store_commit_latency_seconds_count", &[]).unwrap() >= 5.0);
    assert!(sample(&text, "process_resident_memory_bytes", &[]).unwrap() > 0.0);
    assert!(sample(&text, "process_open_fds", &[]).unwrap() > 0.0);
    assert!(sample(&text, "process_virtual_memory_bytes", &[]).unwrap() > 0.0);
    assert!(sample(&text, "process_threads", &[]).unwrap() >= 1.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = sample(&text, "process_start_time_seconds", &[]).expect("a start time");
    assert!(
        started <= now && started > now - 600.0,
        "started {started}, now {now}"
    );
}

/// A scraper that accepts gzip gets the scrape gzipped; one that does not,
/// plain text.
#[tokio::test]
async fn a_scrape_is_gzipped_when_the_scraper_accepts_it() {
    use std::io::Read as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let broker = Broker::start().await;
    let url = broker.http_url().await;
    let authority = url.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: {authority}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .unwrap()
        .unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let mut body = &response[split + 4..];
    let mut gzipped = Vec::new();
    if head.contains("transfer-encoding: chunked") {
        loop {
            let line = body.windows(2).position(|w| w == b"\r\n").unwrap();
            let size = usize::from_str_radix(std::str::from_utf8(&body[..line]).unwrap().trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            gzipped.extend_from_slice(&body[line + 2..line + 2 + size]);
            body = &body[line + 2 + size + 2..];
        }
    } else {
        gzipped.extend_from_slice(body);
    }
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gzipped[..])
        .read_to_string(&mut text)
        .unwrap();
    assert!(sample(&text, "rebound_uptime_seconds", &[]).is_some(), "{text}");
    let (status, plain) = http_get(&format!("{url}/metrics")).await;
    assert_eq!(status, 200);
    assert!(sample(&plain, "rebound_uptime_seconds", &[]).is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn config_reloads_are_counted_ok_and_failed() {
    let config = "[[addresses]]\nname = \"a\"\n";
    let broker = Broker::start_with_config(config).await;
    broker.rewrite_config("[[addresses]]\nname = \"b\"\n");
    broker.hup();
    broker.wait_for_log("config reloaded").await;
    broker.rewrite_config("bogus = 1\n");
    broker.hup();
    broker.wait_for_log("config reload rejected").await;
    let text = broker.scrape().await;
    assert_eq!(
        sample(&text, "rebound_config_reloads_total", &[("result", "ok")]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rebound_config_reloads_total", &[("result", "failed")]),
        Some(1.0),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_over_max_connections_are_closed_and_the_broker_carries_on() {
    let broker = Broker::start_with_config("[limits]\nmax-connections = 3\n").await;
    let mut clients = Vec::new();
    for i in 0..3 {
        let client = broker.client().await;
        client
            .send(OutgoingMessage::new("kept", format!("m{i}")))
            .await
            .unwrap();
        clients.push(client);
    }
    let text = broker.scrape().await;
    assert_eq!(sample(&text, "rebound_connections", &[]), Some(3.0), "{text}");

    // The fourth connection is closed at accept: connecting or its first call fails.
    let extra = tokio::time::timeout(Duration::from_secs(20), async {
        let client = Client::connect(&broker.url()).await?;
        client.server_info().await
    })
    .await
    .expect("the refused connection fails in time, it does not hang");
    assert!(extra.is_err(), "a 4th connection was served: {extra:?}");
    broker.wait_for_log("max-connections (3) are open").await;
    let text = broker.scrape().await;
    assert!(
        sample(&text, "rebound_connections_refused_total", &[]).unwrap() >= 1.0,
        "{text}"
    );
    assert_eq!(sample(&text, "rebound_connections", &[]), Some(3.0), "{text}");

    // The broker still serves the connections it has; nothing stored was lost.
    assert_eq!(clients[0].queue("kept").await.unwrap().messages, 3);
    // A connection that closes makes room for a new one.
    drop(clients.pop());
    let mut again = None;
    for _ in 0..50 {
        if let Ok(client) = Client::connect(&broker.url()).await
            && client.server_info().await.is_ok()
        {
            again = Some(client);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = again.expect("a connection once another closed");
    assert_eq!(again.queue("kept").await.unwrap().messages, 3);
}
