//! Authentication (issue 13): `[[users]]` with argon2id hashes made by `rebound
//! user hash-password`, HTTP basic credentials from the CLI and the client,
//! certificate login over mutual TLS, the slowdown of repeated failures, users
//! swapped by a reload, and the rule for running without users.
use std::time::{Duration, Instant};

use rebound_client::{
    Client, Code, ConnectOptions, Credentials, Error, OutgoingMessage, RoutingType, TlsOptions,
};

use rebound_config::Permission;

use crate::support::{Broker, cli, rebound, rebound_with, root};
use crate::tls::{Ca, Pki, https, trusting};

const INVALID: &str = "invalid user name or password (UNAUTHENTICATED)";

/// The argon2id hash of `password`, by `rebound user hash-password`.
async fn hash(password: &str) -> String {
    let out = rebound_with(["user", "hash-password"], &[], Some(&format!("{password}\n"))).await;
    out.success();
    out.stdout.trim().to_owned()
}

/// `[[users]]` entries for (name, password hash), each with the role `app`,
/// which may do everything everywhere (these tests are about logging in).
fn users(entries: &[(&str, Option<&str>)]) -> String {
    let users: String = entries
        .iter()
        .map(|(name, hash)| {
            let hash = hash.map_or(String::new(), |hash| format!("password-hash = {hash:?}\n"));
            format!("[[users]]\nname = {name:?}\n{hash}roles = [\"app\"]\n")
        })
        .collect();
    let grants: String = Permission::ALL
        .iter()
        .map(|p| format!("{p} = [\"app\"]\n"))
        .collect();
    format!("{users}[[security-settings]]\nmatch = \"#\"\n{grants}")
}

fn login(user: &str, password: &str) -> ConnectOptions {
    ConnectOptions {
        tls: TlsOptions::default(),
        credentials: Some(Credentials::new(user, password)),
    }
}

/// `queue list` against `broker` as `user` with the password in REBOUND_PASSWORD.
async fn list_as(broker: &Broker, user: &str, password: &str) -> crate::support::CliOutput {
    let url = broker.url();
    rebound_with(
        ["queue", "list", "--server", &url, "--user", user],
        &[("REBOUND_PASSWORD", password)],
        None,
    )
    .await
}

fn unauthenticated(result: Result<impl std::fmt::Debug, Error>) -> String {
    match result {
        Err(Error::Status {
            code: Code::Unauthenticated,
            message,
        }) => message,
        other => panic!("expected UNAUTHENTICATED, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn passwords_log_in_and_refusals_do_not_tell_users_apart() {
    let password = "correct horse battery staple";
    let alice = hash(password).await;
    assert!(alice.starts_with("$argon2id$"), "{alice}");
    let broker = Broker::start_with_config(&users(&[("alice", Some(&alice))])).await;

    // Unknown user, wrong password: the same answer. No credentials: refused.
    let wrong = list_as(&broker, "alice", "nope").await;
    let unknown = list_as(&broker, "mallory", password).await;
    wrong.failure(1);
    unknown.failure(1);
    assert_eq!(wrong.stderr, format!("error: {INVALID}\n"));
    assert_eq!(unknown.stderr, wrong.stderr);
    let anonymous = rebound(["queue", "list", "--server", &broker.url()]).await;
    anonymous.failure(1);
    assert!(
        anonymous.stderr.contains("authentication required") && anonymous.stderr.contains("UNAUTHENTICATED"),
        "{}",
        anonymous.stderr
    );

    // The right password: send and receive through the CLI (user and password
    // from the environment) and through the client.
    let url = broker.url();
    let env = [("REBOUND_USER", "alice"), ("REBOUND_PASSWORD", password)];
    let sent = rebound_with(
        ["send", "--server", &url, "--address", "orders", "--body", "hello"],
        &env,
        None,
    )
    .await;
    sent.success();
    let received = rebound_with(["receive", "--server", &url, "--queue", "orders"], &env, None).await;
    assert!(
        received.success().stdout.ends_with("hello\n"),
        "{}",
        received.stdout
    );

    let client = Client::connect_with_options(&url, &login("alice", password))
        .await
        .unwrap();
    client
        .send(OutgoingMessage::new("orders", "again"))
        .await
        .unwrap();
    let mut consumer = client.consume("orders", 1).await.unwrap();
    let delivery = consumer
        .next_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&delivery.message.body[..], b"again");
    consumer.ack(&[delivery.id]).await.unwrap();
    let stranger = Client::connect_with_options(&url, &login("alice", "Nope"))
        .await
        .unwrap();
    assert_eq!(
        unauthenticated(stranger.list_queues().await),
        "invalid user name or password"
    );
    let nobody = Client::connect(&url).await.unwrap();
    unauthenticated(nobody.send(OutgoingMessage::new("orders", "x")).await);

    // Failures are logged with the peer, on the audit target; the password never is.
    let log = broker.wait_for_log("user=\"mallory\"").await;
    assert!(log.contains("rebound::audit"), "{log}");
    assert!(
        log.contains("login refused: invalid user name or password"),
        "{log}"
    );
    assert!(log.contains("peer=127.0.0.1:"), "{log}");
    assert!(!log.contains(password) && !log.contains("nope"), "{log}");
    // Nor in --help, when it comes from the environment.
    let help = rebound_with(["queue", "list", "--help"], &env, None).await;
    assert!(
        help.success().stdout.contains("REBOUND_PASSWORD"),
        "{}",
        help.stdout
    );
    assert!(!help.stdout.contains(password), "{}", help.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn hash_password_refuses_an_empty_password() {
    let out = rebound_with(["user", "hash-password"], &[], Some("\n")).await;
    out.failure(1);
    assert!(out.stderr.contains("empty password"), "{}", out.stderr);
    // Two hashes of one password differ (salted), and both log in (above: one does).
    assert_ne!(hash("pw").await, hash("pw").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_certificate_logs_in_as_the_user_its_cn_names() {
    let pki = Pki::new();
    let ca = Ca::new("rebound test CA");
    pki.issue_server(&ca, "broker");
    let identity = |name: &str| {
        let (cert, key) = ca.leaf(name, false);
        TlsOptions {
            client_cert: Some(pki.write(&format!("{name}.pem"), &cert)),
            client_key: Some(pki.write(&format!("{name}.key"), &key)),
            ..trusting(&pki.path("ca.pem"))
        }
    };
    let config = format!(
        "{}{}",
        pki.config(&format!("client-ca-file = {:?}", pki.path("ca.pem"))),
        users(&[("billing", None)])
    );
    let broker = Broker::start_with_config(&config).await;
    let url = https(&broker);
    let connect = |tls: TlsOptions| {
        let url = url.clone();
        async move {
            let options = ConnectOptions {
                tls,
                credentials: None,
            };
            Client::connect_with_options(&url, &options).await.unwrap()
        }
    };

    let billing = connect(identity("billing")).await;
    billing
        .create_queue("invoices", "invoices", RoutingType::Anycast, true)
        .await
        .unwrap();
    billing
        .send(OutgoingMessage::new("invoices", "42"))
        .await
        .unwrap();

    // A certificate of the CA, but its CN is no user; and no certificate at all.
    let stranger = connect(identity("stranger")).await;
    assert_eq!(
        unauthenticated(stranger.list_queues().await),
        "invalid user name or password"
    );
    let anonymous = connect(trusting(&pki.path("ca.pem"))).await;
    unauthenticated(anonymous.list_queues().await);
    // billing has no password: a password login as billing fails.
    let options = ConnectOptions {
        tls: trusting(&pki.path("ca.pem")),
        credentials: Some(Credentials::new("billing", "")),
    };
    let by_password = Client::connect_with_options(&url, &options).await.unwrap();
    unauthenticated(by_password.list_queues().await);
    broker.wait_for_log("user=\"stranger\"").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_failures_are_slowed_down_but_a_verified_user_is_not() {
    let password = "s3cret";
    let broker = Broker::start_with_config(&users(&[("alice", Some(&hash(password).await))])).await;
    let url = broker.url();
    let alice = Client::connect_with_options(&url, &login("alice", password))
        .await
        .unwrap();
    alice.list_queues().await.unwrap();
    let guesser = Client::connect_with_options(&url, &login("alice", "guess"))
        .await
        .unwrap();

    // Waits of 100, 200, 400 and 800 ms come before the 2nd to 5th guesses.
    let started = Instant::now();
    for _ in 0..5 {
        unauthenticated(guesser.list_queues().await);
    }
    let guessing = started.elapsed();
    assert!(
        guessing >= Duration::from_millis(1200),
        "5 failures took only {guessing:?}"
    );

    // The next guess would wait 1.6 s; alice, from the same IP, is answered at once.
    let started = Instant::now();
    alice.list_queues().await.unwrap();
    let answered = started.elapsed();
    assert!(
        answered < Duration::from_millis(800),
        "a verified user waited {answered:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_that_removes_a_user_refuses_its_next_call() {
    let (alice, bob) = (hash("a-pw").await, hash("b-pw").await);
    let broker = Broker::start_with_config(&users(&[("alice", Some(&alice)), ("bob", Some(&bob))])).await;
    let url = broker.url();
    let client = Client::connect_with_options(&url, &login("alice", "a-pw"))
        .await
        .unwrap();
    client.list_queues().await.unwrap();

    broker.rewrite_config(&users(&[("bob", Some(&bob))]));
    broker.hup();
    broker.wait_for_log("config reloaded").await;
    // The same connection and credentials, cached before: refused now.
    unauthenticated(client.list_queues().await);
    let bob = Client::connect_with_options(&url, &login("bob", "b-pw"))
        .await
        .unwrap();
    bob.list_queues().await.unwrap();
}

/// A reload never turns the login off by accident, on loopback either: one that
/// removes every user is rejected, saying why, unless it says `allow-anonymous =
/// true`. One that changes a key read only at start-up names it in a WARN line.
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_turns_the_login_off_only_when_it_says_so() {
    let broker = Broker::start_with_config(&users(&[("alice", Some(&hash("a-pw").await))])).await;
    broker.rewrite_config("");
    broker.hup();
    let log = broker.wait_for_log("config reload rejected").await;
    assert!(
        log.lines()
            .any(|l| l.contains("ERROR") && l.contains("removes every [[users]] entry")),
        "{log}"
    );
    unauthenticated(broker.client().await.list_queues().await);
    cli(&broker, ["queue", "list"]).await.failure(1);

    broker.rewrite_config("allow-anonymous = true\n");
    broker.hup();
    broker.wait_for_log("config reloaded").await;
    broker.client().await.list_queues().await.unwrap();

    broker.rewrite_config("allow-anonymous = true\ndata-dir = \"elsewhere\"\njournal-file-size = 65536\n");
    broker.hup();
    let log = broker
        .wait_for_log("config reloaded, but not its change of data-dir, journal-file-size")
        .await;
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("data-dir, journal-file-size")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_users_only_loopback_or_allow_anonymous_serves() {
    // Refused before anything is opened, exit 2 as a config error.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = rebound([
        "serve".as_ref(),
        "--listen".as_ref(),
        "0.0.0.0:0".as_ref(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ])
    .await;
    out.failure(2);
    assert!(
        out.stderr
            .contains("error: listening on 0.0.0.0:0 (`listen`) without [[users]]")
            && out.stderr.contains("allow-anonymous = true"),
        "{}",
        out.stderr
    );
    assert!(!data.exists(), "nothing is created");

    // On loopback: served, with a warning.
    let local = Broker::start().await;
    local.wait_for_log("no [[users]] configured").await;
    local.client().await.list_queues().await.unwrap();

    // allow-anonymous = true: served on any address, with a warning; a reload
    // keeping it is fine, one dropping it is rejected.
    let allowed = "allow-anonymous = true\n";
    let broker = Broker::start_custom(allowed, "0.0.0.0:0", &["--log-format", "json"]).await;
    broker.wait_for_log("allow-anonymous = true: anyone").await;
    let url = format!("http://127.0.0.1:{}", broker.addr().port());
    Client::connect(&url).await.unwrap().list_queues().await.unwrap();
    broker.rewrite_config("allow-anonymous = false\n");
    broker.hup();
    let log = broker.wait_for_log("config reload rejected").await;
    assert!(log.contains("without [[users]]"), "{log}");
    Client::connect(&url).await.unwrap().list_queues().await.unwrap();

    // --log-format json: one object per line, the audit events among them.
    let password = "pw";
    broker.rewrite_config(&users(&[("alice", Some(&hash(password).await))]));
    broker.hup();
    broker.wait_for_log("config reloaded").await;
    unauthenticated(Client::connect(&url).await.unwrap().list_queues().await);
    let log = broker.wait_for_log("login refused").await;
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let refused = events
        .iter()
        .find(|event| event["target"] == "rebound::audit")
        .expect("an audit event");
    assert_eq!(refused["level"], "WARN");
    assert_eq!(refused["operation"], "login");
    assert_eq!(refused["result"], "denied");
    assert!(
        refused["peer"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{refused}"
    );
    Client::connect_with_options(&url, &login("alice", password))
        .await
        .unwrap()
        .list_queues()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_secure_example_config_is_the_documented_one_and_runs_with_its_users() {
    let root = root();
    let example = std::fs::read_to_string(root.join("config/examples/secure.toml")).unwrap();
    let docs = std::fs::read_to_string(root.join("docs/security.md")).unwrap();
    assert!(
        docs.contains(&format!("```toml\n{example}```")),
        "docs/security.md and config/examples/secure.toml differ"
    );

    // Its certificates, made here; `listen` and `data-dir` are overridden by the harness.
    let pki = Pki::new();
    let ca = Ca::new("rebound test CA");
    pki.issue_server(&ca, "broker");
    pki.write("clients-ca.pem", &ca.pem);
    let (cert, key) = ca.leaf("billing-service", false);
    let billing_tls = TlsOptions {
        client_cert: Some(pki.write("billing.pem", &cert)),
        client_key: Some(pki.write("billing.key", &key)),
        ..trusting(&pki.path("ca.pem"))
    };
    let dir = format!("{}/", pki.path("").display());
    let broker = Broker::start_with_config(&example.replace("/etc/rebound/", &dir)).await;
    let url = https(&broker);

    let with = |credentials: Option<Credentials>| ConnectOptions {
        tls: trusting(&pki.path("ca.pem")),
        credentials,
    };
    let orders = Client::connect_with_options(
        &url,
        &with(Some(Credentials::new("orders-app", "orders-change-me"))),
    )
    .await
    .unwrap();
    orders
        .send(OutgoingMessage::new("orders", "secure"))
        .await
        .unwrap();
    let billing = Client::connect_with_options(
        &url,
        &ConnectOptions {
            tls: billing_tls,
            credentials: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(billing.queue("orders").await.unwrap().messages, 1);
    let admin =
        Client::connect_with_options(&url, &with(Some(Credentials::new("admin", "orders-change-me"))))
            .await
            .unwrap();
    unauthenticated(admin.list_queues().await);
}
