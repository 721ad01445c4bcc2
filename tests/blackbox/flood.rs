//! Availability under abuse (issue 31): peers that connect and never speak, or
//! never log in, cannot lock out the clients that do, on the gRPC listener or
//! the HTTP one; and a broker short of file handles refuses connections, never
//! its store.
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use rebound_client::{Client, OutgoingMessage, Selection};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{Broker, cli, http_get, sample};

/// Opens `count` connections to `addr` from `from` that never send a byte.
async fn idle_connections(addr: SocketAddr, from: Ipv4Addr, count: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = TcpSocket::new_v4().expect("a socket");
        socket
            .bind(SocketAddr::new(IpAddr::V4(from), 0))
            .expect("bind to a loopback address");
        held.push(
            socket
                .connect(addr)
                .await
                .expect("the kernel accepts the connection"),
        );
    }
    held
}

/// Whether the broker closed `stream` (EOF or reset) within `within`; what it
/// sends before (an HTTP/2 server's SETTINGS) is read and dropped.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 256];
    let closed = async { while matches!(stream.read(&mut buf).await, Ok(1..)) {} };
    tokio::time::timeout(within, closed).await.is_ok()
}

/// Sends and receives one message within a generous bound.
async fn round_trip(broker: &Broker, queue: &str) {
    let served = tokio::time::timeout(Duration::from_secs(20), async {
        let client = Client::connect(&broker.url()).await.expect("connect");
        client
            .send(OutgoingMessage::new(queue, "through"))
            .await
            .expect("send");
        let mut consumer = client.consume(queue, 1).await.expect("consume");
        let delivery = consumer.next().await.expect("receive").expect("a delivery");
        consumer.ack(&[delivery.id]).await.expect("ack");
    })
    .await;
    assert!(served.is_ok(), "a client was not served; log:\n{}", broker.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_that_never_speak_do_not_lock_clients_out() {
    let broker = Broker::start_with_config("[limits]\nmax-connections = 100\n").await;
    let _idle = idle_connections(broker.addr(), Ipv4Addr::LOCALHOST, 150).await;
    // The idle ones hold every slot; the next ones to come make themselves room.
    cli(&broker, ["health"]).await.success();
    round_trip(&broker, "through").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_that_never_speaks_is_closed_after_the_handshake_timeout() {
    let broker = Broker::start_with_config("[limits]\nhandshake-timeout-ms = 500\n").await;
    let started = Instant::now();
    let mut grpc = TcpStream::connect(broker.addr()).await.unwrap();
    let http: SocketAddr = broker.http_url().await["http://".len()..].parse().unwrap();
    let mut http = TcpStream::connect(http).await.unwrap();
    assert!(
        closed_within(&mut grpc, Duration::from_secs(10)).await,
        "gRPC kept it open"
    );
    assert!(
        closed_within(&mut http, Duration::from_secs(10)).await,
        "HTTP kept it open"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "closed before its timeout"
    );
    // A client that speaks is unaffected by the short deadline.
    round_trip(&broker, "speaks").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_address_cannot_hold_more_than_its_share() {
    let broker = Broker::start_with_config("[limits]\nmax-connections-per-ip = 10\n").await;
    let mut flood = idle_connections(broker.addr(), Ipv4Addr::new(127, 0, 0, 2), 30).await;
    // Each newcomer over the share pushed out the oldest that never spoke.
    let mut closed = 0;
    for stream in &mut flood[..20] {
        closed += usize::from(closed_within(stream, Duration::from_secs(5)).await);
    }
    assert_eq!(closed, 20, "the oldest 20 of 30 were closed");
    let text = broker.scrape().await;
    assert_eq!(sample(&text, "rebound_connections", &[]), Some(10.0), "{text}");
    // Another address is not held back by that one's share.
    round_trip(&broker, "other-address").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_that_logged_in_are_not_the_ones_refused() {
    let broker = Broker::start_with_config("[limits]\nmax-connections-per-ip = 4\n").await;
    let mut clients = Vec::new();
    for i in 0..4 {
        let client = broker.client().await;
        client
            .send(OutgoingMessage::new("kept", format!("m{i}")))
            .await
            .unwrap();
        clients.push(client);
    }
    // At its share, one more from the same address is closed at once: the
    // four that have served calls stay.
    let mut extra = idle_connections(broker.addr(), Ipv4Addr::LOCALHOST, 3).await;
    for stream in &mut extra {
        assert!(
            closed_within(stream, Duration::from_secs(5)).await,
            "a fifth was kept"
        );
    }
    for client in &clients {
        assert_eq!(client.count_messages(&Selection::new("kept")).await.unwrap(), 4);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_http_endpoint_answers_through_a_flood_of_idle_connections() {
    let broker = Broker::start_with_config("[limits]\nmax-http-connections = 50\n").await;
    let url = broker.http_url().await;
    let http: SocketAddr = url["http://".len()..].parse().unwrap();
    let _idle = idle_connections(http, Ipv4Addr::LOCALHOST, 80).await;
    let ready = tokio::time::timeout(Duration::from_secs(20), http_get(&format!("{url}/health/ready"))).await;
    assert_eq!(ready.expect("/health/ready answers in time").0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn short_of_file_handles_the_broker_refuses_connections_not_its_store() {
    const MESSAGES: usize = 3_000;
    // A share per address above the flood: the handles must run short first.
    let broker = Broker::start_with_nofile("[limits]\nmax-connections-per-ip = 5000\n", 1024).await;
    // More idle connections than the broker has handles for.
    let idle = idle_connections(broker.addr(), Ipv4Addr::LOCALHOST, 1_100).await;
    let client = broker.client().await;
    let body = "x".repeat(1024);
    for i in 0..MESSAGES {
        client
            .send(OutgoingMessage::new("through-the-flood", body.clone()))
            .await
            .unwrap_or_else(|e| panic!("send {i}: {e}; log:\n{}", broker.log()));
    }
    // Every message reached the store, and its writes (run files, checkpoints) too.
    assert!(!broker.log().contains("Too many open files"), "{}", broker.log());
    cli(&broker, ["health"]).await.success();
    drop(idle);
    let selection = Selection::new("through-the-flood");
    assert_eq!(client.count_messages(&selection).await.unwrap(), MESSAGES as u64);
    client
        .send(OutgoingMessage::new("through-the-flood", "after"))
        .await
        .unwrap();
}
