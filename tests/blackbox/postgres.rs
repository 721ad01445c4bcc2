//! A broker on PostgreSQL whose database goes away and comes back: sends fail
//! with UNAVAILABLE (never acknowledged without being stored) and work again
//! without a restart; a dispatcher that cannot store delivery counts backs off
//! rather than spinning. (The messaging, redelivery, transaction and operations
//! tests run on PostgreSQL too, through `also_on_postgres!`.)
use std::time::{Duration, Instant};

use rebound_client::{Client, Code, OutgoingMessage, RoutingType};

use crate::support::pg::{DatabaseProxy, TestSchema};
use crate::support::{Broker, rebound};

#[tokio::test(flavor = "multi_thread")]
async fn sends_fail_unavailable_while_the_database_is_away_and_work_again_once_it_is_back() {
    let Some(setup) = behind_a_proxy("black-box PostgreSQL outage", "", "before").await else {
        return;
    };
    let (_schema, mut proxy, _broker, client) = setup;

    proxy.cut().await;
    let err = client
        .send(OutgoingMessage::new("orders", "while away"))
        .await
        .expect_err("nothing is acknowledged while the database is away");
    assert_eq!(err.code(), Some(Code::Unavailable), "{err}");
    assert!(err.to_string().contains("the database is unavailable"), "{err}");

    proxy.resume().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.send(OutgoingMessage::new("orders", "after")).await {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline && e.code() == Some(Code::Unavailable) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("sends still fail once the database is back: {e}"),
        }
    }
    let mut consumer = client.consume("orders", 10).await.unwrap();
    let mut bodies = Vec::new();
    while let Some(d) = consumer.next_timeout(Duration::from_secs(2)).await.unwrap() {
        bodies.push(String::from_utf8_lossy(&d.message.body).into_owned());
        consumer.ack(&[d.id]).await.unwrap();
    }
    assert_eq!(bodies, ["before", "after"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dispatcher_that_cannot_store_delivery_counts_backs_off_and_logs_once() {
    let toml = "persist-delivery-count-before-delivery = true\n";
    let Some(setup) = behind_a_proxy("black-box PostgreSQL outage, persisted counts", toml, "waits").await
    else {
        return;
    };
    let (_schema, mut proxy, broker, client) = setup;
    let mut consumer = client.consume_manual_credit("orders", 0).await.unwrap();

    proxy.cut().await;
    let log_lines = broker.log().lines().count();
    let cpu = cpu_seconds(broker.pid());
    // The message is due and has a consumer, but its count cannot be stored.
    consumer.grant(1).await.unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let used = cpu_seconds(broker.pid()) - cpu;
    let log = broker.log();
    let logged: Vec<&str> = log.lines().skip(log_lines).collect();
    eprintln!("{used:.2} CPU-s and {} log lines in 10 s", logged.len());
    assert!(used < 2.0, "{used:.2} CPU-s in 10 s while the database was away");
    assert!(logged.len() < 50, "{} lines logged: {logged:#?}", logged.len());
    assert!(
        consumer.next_timeout(Duration::ZERO).await.unwrap().is_none(),
        "delivered without its count stored"
    );

    proxy.resume().await;
    let d = consumer
        .next_timeout(Duration::from_secs(15))
        .await
        .unwrap()
        .expect("delivered once the database is back");
    assert_eq!((&d.message.body[..], d.delivery_count), (&b"waits"[..], 1));
    consumer.ack(&[d.id]).await.unwrap();
    consumer.flush().await.unwrap();
    let log = broker.wait_for_log("storage works again").await;
    assert_eq!(log.matches("storing delivery counts failed").count(), 1, "{log}");
    assert_eq!(log.matches("storage works again").count(), 1, "{log}");
}

/// A broker with `toml` as its config on a test schema it reaches through a
/// proxy the test can cut, and a client that made a durable queue `orders`
/// and sent it `first`; `None` (skipped) without a test database.
async fn behind_a_proxy(
    test: &str,
    toml: &str,
    first: &'static str,
) -> Option<(TestSchema, DatabaseProxy, Broker, Client)> {
    let schema = TestSchema::create(test)?;
    let proxy = DatabaseProxy::start(&schema).await;
    let broker = Broker::start_custom(
        toml,
        "127.0.0.1:0",
        &["--storage", "postgres", "--postgres-url", proxy.url()],
    )
    .await;
    let client = broker.client().await;
    client
        .create_queue("orders", "orders", RoutingType::Anycast, true)
        .await
        .unwrap();
    client.send(OutgoingMessage::new("orders", first)).await.unwrap();
    Some((schema, proxy, broker, client))
}

/// CPU time a process has used, user and system, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses: utime and stime
    // are the 14th and 15th of the line, in clock ticks.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    let getconf = std::process::Command::new("getconf").arg("CLK_TCK").output();
    let per_second: f64 = String::from_utf8(getconf.unwrap().stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    ticks / per_second
}

#[tokio::test]
async fn serve_on_postgres_without_a_reachable_database_says_why_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--http-listen", ""];
        args.extend(["--data-dir", data_dir.to_str().unwrap(), "--storage", "postgres"]);
        args.extend(extra);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let out = rebound(serve(&[])).await;
    out.failure(1);
    assert!(
        out.stderr
            .contains("storage = \"postgres\" needs a database: set postgres-url"),
        "{}",
        out.stderr
    );
    // Bound and dropped: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://rebound@127.0.0.1:{port}/rebound");
    let out = rebound(serve(&["--postgres-url", &url])).await;
    out.failure(1);
    assert!(
        out.stderr
            .contains("cannot open the store in PostgreSQL: the database is unavailable"),
        "{}",
        out.stderr
    );
    assert!(!data_dir.exists(), "no data dir on PostgreSQL");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_given_the_database_ca_serves_over_tls_to_it() {
    let test = "black-box PostgreSQL over TLS";
    let Some(schema) = TestSchema::create(test) else {
        return;
    };
    let Some(ca_file) = crate::support::pg::database_ca_file(test) else {
        return;
    };
    let name = format!("rebound_bb_tls_{}", std::process::id());
    let config = format!(
        "storage = \"postgres\"\npostgres-url = \"{}&application_name={name}\"\npostgres-ca-file = {:?}\n",
        schema.url(),
        ca_file
    );
    let broker = Broker::start_custom(&config, "127.0.0.1:0", &[]).await;
    round_trip(&broker, "encrypted").await;
    let plain = schema.query_i64(&format!(
        "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
         WHERE a.application_name = '{name}' AND NOT s.ssl"
    ));
    let encrypted = schema.query_i64(&format!(
        "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
         WHERE a.application_name = '{name}' AND s.ssl"
    ));
    assert_eq!(plain, 0, "a plain connection of the broker");
    assert!(encrypted >= 1, "no encrypted connection of the broker");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_given_a_client_certificate_logs_in_to_a_database_that_demands_one() {
    let Some(login) = crate::support::pg::cert_login("black-box PostgreSQL client certificate") else {
        return;
    };
    let config = format!(
        "storage = \"postgres\"\npostgres-url = \"{}\"\npostgres-ca-file = {:?}\n\
         postgres-client-cert-file = {:?}\npostgres-client-key-file = {:?}\n",
        login.url, login.ca, login.cert, login.key
    );
    let broker = Broker::start_custom(&config, "127.0.0.1:0", &[]).await;
    round_trip(&broker, "by certificate").await;
}

/// Creates queue `orders`, sends `body` to it, and receives and acks it.
async fn round_trip(broker: &Broker, body: &str) {
    let client = broker.client().await;
    client
        .create_queue("orders", "orders", RoutingType::Anycast, true)
        .await
        .unwrap();
    client
        .send(OutgoingMessage::new("orders", body.to_owned()))
        .await
        .unwrap();
    let mut consumer = client.consume("orders", 10).await.unwrap();
    let d = consumer
        .next_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("delivered");
    assert_eq!(&d.message.body[..], body.as_bytes());
    consumer.ack(&[d.id]).await.unwrap();
}
