//! The HTTP endpoint with users: every operator route (`/metrics`, the console
//! and its API) asks for an HTTP basic login against the broker's users, and
//! applies their permissions as gRPC does; `/health/*` needs none; without users
//! the endpoint, like gRPC, serves only on loopback unless `allow-anonymous`.
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rebound_client::Client;
use serde_json::{Value, json};

use crate::console::{POISON_CONFIG, poison};
use crate::permissions::{PASSWORD, login, users};
use crate::support::{Broker, HttpAnswer, http_exchange, http_exchange_as, rebound, sample, temp_file};

/// `admin` may do everything; `viewer` may only browse `orders` and the DLA;
/// `ops` may browse and send to `orders` and manage the DLA, but nothing on
/// `secret` (whose dead letters also land on the DLA).
const SECURITY: &str = r##"
[[security-settings]]
match = "#"
send = ["admin"]
consume = ["admin"]
browse = ["admin"]
create-address = ["admin"]
create-queue = ["admin"]
manage = ["admin"]

[[security-settings]]
match = "orders"
send = ["admin", "ops"]
consume = ["admin"]
browse = ["admin", "viewer", "ops"]
create-address = ["admin"]
create-queue = ["admin"]
manage = ["admin"]

[[security-settings]]
match = "DLA"
browse = ["admin", "viewer", "ops"]
manage = ["admin", "ops"]
consume = ["admin"]
"##;

pub fn config() -> String {
    format!(
        "{}{POISON_CONFIG}{SECURITY}",
        users(&[("admin", &["admin"]), ("viewer", &["viewer"]), ("ops", &["ops"])])
    )
}

async fn call(
    broker: &Broker,
    method: &str,
    path: &str,
    body: Option<Value>,
    login: Option<(&str, &str)>,
) -> HttpAnswer {
    let url = format!("{}{path}", broker.http_url().await);
    http_exchange(method, &url, body.map(|b| b.to_string()).as_deref(), login).await
}

async fn get_as(broker: &Broker, user: &str, path: &str) -> HttpAnswer {
    call(broker, "GET", path, None, Some((user, PASSWORD))).await
}

async fn post_as(broker: &Broker, user: &str, path: &str, body: Value) -> (u16, Value) {
    let answer = call(broker, "POST", path, Some(body), Some((user, PASSWORD))).await;
    let value = serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", answer.body));
    (answer.status, value)
}

async fn messages(client: &Client, queue: &str) -> u64 {
    client.queue(queue).await.unwrap().messages
}

#[tokio::test(flavor = "multi_thread")]
async fn with_users_every_operator_route_asks_for_a_login_and_health_does_not() {
    let broker = Broker::start_with_config(&config()).await;
    for path in ["/metrics", "/api/queues", "/api/overview", "/"] {
        for login in [None, Some(("admin", "wrong")), Some(("mallory", PASSWORD))] {
            let answer = call(&broker, "GET", path, None, login).await;
            assert_eq!(answer.status, 401, "{path} {login:?}: {}", answer.body);
            assert!(
                answer
                    .head
                    .to_ascii_lowercase()
                    .contains("www-authenticate: basic realm=\"rebound\""),
                "{path}: {}",
                answer.head
            );
            if login.is_some() {
                assert_eq!(answer.body, "invalid user name or password\n", "{path}");
            }
        }
        assert_eq!(get_as(&broker, "admin", path).await.status, 200, "{path}");
    }
    let refused = call(
        &broker,
        "POST",
        "/api/queues/DLQ.orders/remove",
        Some(json!({"all": true})),
        None,
    )
    .await;
    assert_eq!(refused.status, 401);
    for path in ["/health/live", "/health/ready"] {
        assert_eq!(call(&broker, "GET", path, None, None).await.status, 200, "{path}");
    }
    // Failed HTTP logins reach the audit log as gRPC's do.
    let log = broker.wait_for_log("login refused").await;
    assert!(
        log.contains("user=mallory") || log.contains("user=\"mallory\""),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browse_only_user_looks_but_cannot_act_and_sees_only_what_it_may_browse() {
    let broker = Broker::start_with_config(&config()).await;
    let admin = login(&broker, "admin").await;
    poison(&admin, "orders", &["a"], "db down").await;
    poison(&admin, "secret", &["s"], "db down").await;

    for path in [
        "/api/queues/DLQ.orders",
        "/api/queues/DLQ.orders/messages",
        "/api/queues/DLQ.orders/dead-letters",
        "/api/queues/orders",
        "/api/addresses/orders/redelivery",
    ] {
        let answer = get_as(&broker, "viewer", path).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    }
    for path in [
        "/api/queues/secret",
        "/api/queues/secret/messages",
        "/api/addresses/secret/redelivery",
    ] {
        let answer = get_as(&broker, "viewer", path).await;
        assert_eq!(answer.status, 403, "{path}: {}", answer.body);
        let error: Value = serde_json::from_str(&answer.body).unwrap();
        let error = error["error"].as_str().unwrap();
        assert!(
            error.contains("user 'viewer'") && error.contains("`browse`") && error.contains("'secret'"),
            "{error}"
        );
    }
    for (action, body) in [
        ("retry", json!({"all": true})),
        ("retry", json!({"all": true, "dry_run": true})),
        ("move", json!({"all": true, "to_address": "orders"})),
        ("remove", json!({"all": true})),
    ] {
        let (status, v) = post_as(
            &broker,
            "viewer",
            &format!("/api/queues/DLQ.orders/{action}"),
            body,
        )
        .await;
        assert_eq!(status, 403, "{action}: {v}");
        let error = v["error"].as_str().unwrap();
        assert!(
            error.contains("user 'viewer'") && error.contains("`manage`") && error.contains("'DLA'"),
            "{error}"
        );
    }
    assert_eq!(
        messages(&admin, "DLQ.orders").await,
        1,
        "a denial changes nothing"
    );

    // Lists and metrics show only what the caller may browse.
    let queues: Value = serde_json::from_str(&get_as(&broker, "viewer", "/api/queues").await.body).unwrap();
    let names: Vec<&str> = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"orders") && names.contains(&"DLQ.orders"),
        "{names:?}"
    );
    assert!(!names.contains(&"secret"), "{names:?}");
    let overview: Value =
        serde_json::from_str(&get_as(&broker, "viewer", "/api/overview").await.body).unwrap();
    assert_eq!(overview["gauges"]["queues"], names.len(), "{overview}");
    // orders, DLQ.orders and DLQ.secret (on the DLA) took one message each;
    // secret's own is not counted.
    assert_eq!(overview["totals"]["added"], 3, "{overview}");
    assert_eq!(
        overview["rates"],
        json!([]),
        "the broker-wide history is not shown"
    );
    let metrics = get_as(&broker, "viewer", "/metrics").await;
    assert_eq!(metrics.status, 200);
    assert!(sample(&metrics.body, "rebound_queue_messages", &[("queue", "orders")]).is_some());
    assert!(sample(&metrics.body, "rebound_queue_messages", &[("queue", "secret")]).is_none());
    assert!(
        sample(&metrics.body, "rebound_connections", &[]).is_some(),
        "broker-wide figures stay"
    );
    let all = get_as(&broker, "admin", "/metrics").await.body;
    assert!(sample(&all, "rebound_queue_messages", &[("queue", "secret")]).is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn console_actions_need_what_grpc_needs_and_are_audited() {
    let broker = Broker::start_with_config(&config()).await;
    let admin = login(&broker, "admin").await;
    poison(&admin, "orders", &["a"], "db down").await;
    poison(&admin, "secret", &["s"], "db down").await;

    // ops manages the DLA and may send to orders: the retry goes through.
    let (status, v) = post_as(
        &broker,
        "ops",
        "/api/queues/DLQ.orders/retry",
        json!({"all": true}),
    )
    .await;
    assert_eq!((status, v["moved"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(messages(&admin, "orders").await, 1);
    let line = broker
        .wait_for_log("operation=\"retry\" address=\"DLA\" queue=\"DLQ.orders\" messages=1")
        .await;
    let line = line
        .lines()
        .find(|l| l.contains("operation=\"retry\"") && l.contains("management operation"))
        .unwrap();
    assert!(
        line.contains("user=\"ops\"") && line.contains("peer=127.0.0.1:") && line.contains("result=\"ok\""),
        "{line}"
    );

    // A dead letter of secret may not go back: ops may not send there. Skipped.
    let (status, v) = post_as(
        &broker,
        "ops",
        "/api/queues/DLQ.secret/retry",
        json!({"all": true}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["moved"].as_u64(), v["skipped"].as_u64()),
        (Some(0), Some(1)),
        "{v}"
    );
    let why = v["outcomes"][0]["skipped"].as_str().unwrap();
    assert!(why.contains("`send`") && why.contains("'secret'"), "{why}");
    assert_eq!(messages(&admin, "DLQ.secret").await, 1);
    assert_eq!(messages(&admin, "secret").await, 0);

    // A move needs send on its target.
    let body = json!({"all": true, "to_address": "secret"});
    let (status, v) = post_as(&broker, "ops", "/api/queues/DLQ.secret/move", body).await;
    assert_eq!(status, 403, "{v}");
    assert!(v["error"].as_str().unwrap().contains("`send`"), "{v}");
    assert_eq!(messages(&admin, "DLQ.secret").await, 1);
    let (status, v) = post_as(
        &broker,
        "ops",
        "/api/queues/DLQ.secret/remove",
        json!({"all": true}),
    )
    .await;
    assert_eq!((status, v["removed"].as_u64()), (200, Some(1)), "{v}");
    broker
        .wait_for_log("operation=\"remove\" address=\"DLA\" queue=\"DLQ.secret\" messages=1")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_users_http_listens_on_loopback_unless_allow_anonymous() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = rebound([
        "serve".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--http-listen".as_ref(),
        "0.0.0.0:0".as_ref(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ])
    .await;
    out.failure(2);
    assert!(
        out.stderr
            .contains("error: listening on 0.0.0.0:0 (`http-listen`) without [[users]]"),
        "{}",
        out.stderr
    );
    assert!(!data.exists(), "nothing is created");

    let allowed = "http-listen = \"0.0.0.0:0\"\nallow-anonymous = true\n";
    let broker = Broker::start_with_config(allowed).await;
    let answer = call(&broker, "GET", "/api/queues", None, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    broker.rewrite_config("http-listen = \"0.0.0.0:0\"\n");
    broker.hup();
    let log = broker.wait_for_log("config reload rejected").await;
    assert!(log.contains("(`http-listen`) without [[users]]"), "{log}");
}

/// DNS rebinding: a page of another site whose name was pointed at 127.0.0.1
/// reaches the loopback endpoint with its own name in `Host`. Only the endpoint's
/// own names and `http-allowed-hosts` are answered; the probes answer any.
#[tokio::test(flavor = "multi_thread")]
async fn the_endpoint_answers_only_its_own_host_names() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    client
        .send(rebound_client::OutgoingMessage::new("q", "kept"))
        .await
        .unwrap();
    let url = broker.http_url().await;
    let port = url.rsplit(':').next().unwrap().to_owned();
    let as_host = |method, path: &str, host: &str| {
        let url = format!("{url}{path}");
        let body = (method == "POST").then_some(r#"{"all": true}"#);
        let host = host.to_owned();
        async move { http_exchange_as(method, &url, body, None, Some(&host)).await }
    };
    for host in ["attacker.example", &format!("attacker.example:{port}")] {
        let answer = as_host("POST", "/api/queues/q/remove", host).await;
        assert_eq!(answer.status, 421, "{host}: {}", answer.body);
        assert!(
            answer.body.contains("attacker.example") && answer.body.contains("http-allowed-hosts"),
            "{}",
            answer.body
        );
        assert_eq!(as_host("GET", "/metrics", host).await.status, 421);
    }
    assert_eq!(messages(&client, "q").await, 1, "nothing was removed");
    assert_eq!(as_host("GET", "/health/ready", "10.1.2.3:8161").await.status, 200);
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "LOCALHOST".to_owned(),
    ] {
        let answer = as_host("GET", "/api/queues", &host).await;
        assert_eq!(answer.status, 200, "{host}: {}", answer.body);
    }

    // Names of the operator's own, checked as the config loads.
    let (_dir, bad) = temp_file("rebound.toml", "http-allowed-hosts = [\"http://console/\"]\n");
    let check = rebound([
        "config".as_ref(),
        "check".as_ref(),
        "--config".as_ref(),
        bad.as_os_str(),
    ])
    .await;
    check.failure(2);
    assert!(check.stderr.contains("http-allowed-hosts[0]"), "{}", check.stderr);
    let named = Broker::start_with_config("http-allowed-hosts = [\"Console.Example.com\"]\n").await;
    let url = format!("{}/api/queues", named.http_url().await);
    for (host, status) in [("console.example.com:443", 200), ("attacker.example", 421)] {
        let answer = http_exchange_as("GET", &url, None, None, Some(host)).await;
        assert_eq!(answer.status, status, "{host}: {}", answer.body);
    }
}

/// A queue in outage mode shows as such everywhere (its state, the overview, its
/// held-back messages as paused); one who may `manage` it sends the next probe
/// now or resumes it, audited; one who may not is refused.
#[tokio::test(flavor = "multi_thread")]
async fn an_outage_shows_and_an_operator_probes_and_resumes_the_queue() {
    let broker = Broker::start_with_config(&config()).await;
    let admin = login(&broker, "admin").await;
    for body in ["a", "b"] {
        admin
            .send(rebound_client::OutgoingMessage::new("orders", body))
            .await
            .unwrap();
    }
    admin
        .send(rebound_client::OutgoingMessage::new("billing", "c"))
        .await
        .unwrap();
    let mut consumer = admin.consume("orders", 10).await.unwrap();
    let got = crate::messaging::receive(&mut consumer, 2, Duration::from_secs(5)).await;
    let ids: Vec<u64> = got.iter().map(|d| d.id).collect();
    consumer
        .nack_pausing_queue(&ids, "db down", Duration::from_secs(600))
        .await
        .unwrap();
    consumer.flush().await.unwrap();

    let (status, table) = get_json(&broker, "admin", "/api/queues?sort=state&dir=desc").await;
    assert_eq!(status, 200, "{table}");
    let first = &table["queues"][0];
    assert_eq!(
        (&first["name"], &first["state"]),
        (&json!("orders"), &json!("outage")),
        "{table}"
    );
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(first["next_probe_at_ms"].as_u64().unwrap() > now_ms, "{first}");
    let (_, overview) = get_json(&broker, "admin", "/api/overview").await;
    assert_eq!(overview["outages"]["count"], 1, "{overview}");
    assert_eq!(overview["outages"]["queues"][0]["name"], "orders", "{overview}");
    let (_, page) = get_json(&broker, "admin", "/api/queues/orders/messages").await;
    let states: Vec<&Value> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["state"])
        .collect();
    assert_eq!(states, [&json!("paused"), &json!("paused")], "{page}");

    // ops may browse orders but not manage it.
    let (status, v) = post_as(&broker, "ops", "/api/queues/orders/probe", json!({})).await;
    assert_eq!(status, 403, "{v}");
    assert!(v["error"].as_str().unwrap().contains("manage"), "{v}");

    let (status, v) = post_as(&broker, "admin", "/api/queues/orders/probe", json!({})).await;
    assert_eq!((status, &v["probing"]), (200, &json!(true)), "{v}");
    let probe = crate::messaging::receive(&mut consumer, 1, Duration::from_secs(10)).await;
    assert_eq!(
        probe.len(),
        1,
        "the probe went at once, not after the 600 s pause"
    );
    let (_, v) = post_as(&broker, "admin", "/api/queues/orders/probe", json!({})).await;
    assert_eq!(v["probing"], false, "a probe is already out: {v}");

    let (status, v) = post_as(&broker, "admin", "/api/queues/orders/resume", json!({})).await;
    assert_eq!((status, &v["resumed"]), (200, &json!(true)), "{v}");
    assert!(!admin.queue("orders").await.unwrap().outage);
    let rest = crate::messaging::receive(&mut consumer, 1, Duration::from_secs(10)).await;
    assert_eq!(rest.len(), 1, "delivery resumed");
    let (_, v) = post_as(&broker, "admin", "/api/queues/billing/resume", json!({})).await;
    assert_eq!(v["resumed"], false, "billing was not in outage: {v}");

    for operation in ["probe-now", "resume"] {
        let log = broker
            .wait_for_log(&format!(
                "operation=\"{operation}\" address=\"orders\" queue=\"orders\""
            ))
            .await;
        assert!(log.contains("management operation"), "{log}");
    }
}

async fn get_json(broker: &Broker, user: &str, path: &str) -> (u16, Value) {
    let answer = get_as(broker, user, path).await;
    let value = serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", answer.body));
    (answer.status, value)
}
