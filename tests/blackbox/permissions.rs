//! Permissions (issue 13): `[[security-settings]]` enforced on every operation,
//! a denial changes nothing, auto-creation needs the create permissions, a
//! reload applies to the next call and ends consume streams that lost
//! `consume`, `config resolve` shows who may do what, and the audit log.
use std::time::Duration;

use rebound_client::{
    Client, Code, ConnectOptions, Credentials, Error, MessageState, OutgoingMessage, RoutingType, Selection,
    TlsOptions,
};

use crate::support::{Broker, rebound, temp_file};

/// Every user's password.
pub const PASSWORD: &str = "correct horse";

/// The argon2id hash of [`PASSWORD`] (`rebound user hash-password`).
pub const HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$8WI9whuIhNH3MaKZlM29gA$AOSOE4+ZdvTPHslJ/4Ux88QsOkmNpqJ5B6TDtFYZ2SE";

/// `[[users]]` entries: (name, roles), all with [`PASSWORD`].
pub fn users(entries: &[(&str, &[&str])]) -> String {
    entries
        .iter()
        .map(|(name, roles)| {
            format!("[[users]]\nname = {name:?}\npassword-hash = {HASH:?}\nroles = {roles:?}\n")
        })
        .collect()
}

/// The users of the matrix, one role each (`nobody` none).
const USERS: &[(&str, &[&str])] = &[
    ("admin", &["admin"]),
    ("producer", &["producer"]),
    ("consumer", &["consumer"]),
    ("operator", &["operator"]),
    ("nobody", &[]),
];

/// Addresses `app.q` and `app.other` (a queue each), `app.side` (none), a DLQ,
/// and who may do what:
/// `admin` everything everywhere; on `app.#` producers send, consumers consume
/// and browse, operators browse, delete and manage; on the DLQ operators manage.
const SECURITY: &str = r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
[[addresses]]
name = "app.q"
  [[addresses.queues]]
  name = "app.q"
[[addresses]]
name = "app.other"
  [[addresses.queues]]
  name = "app.other"
[[addresses]]
name = "app.side"                 # where queues are created and deleted

[[security-settings]]
match = "#"
send = ["admin"]
consume = ["admin"]
browse = ["admin"]
create-address = ["admin"]
delete-address = ["admin"]
create-queue = ["admin"]
delete-queue = ["admin"]
manage = ["admin"]

[[security-settings]]
match = "app.#"
send = ["producer", "admin"]
consume = ["consumer", "admin"]
browse = ["consumer", "operator", "admin"]
create-address = ["producer", "admin"]
create-queue = ["producer", "consumer", "admin"]
delete-address = ["operator", "admin"]
delete-queue = ["operator", "admin"]
manage = ["operator", "admin"]

[[security-settings]]
match = "DLQ"
browse = ["operator", "admin"]
manage = ["operator", "admin"]
consume = ["admin"]
"##;

fn matrix_config() -> String {
    format!("{}{SECURITY}", users(USERS))
}

pub async fn login(broker: &Broker, user: &str) -> Client {
    let options = ConnectOptions {
        tls: TlsOptions::default(),
        credentials: Some(Credentials::new(user, PASSWORD)),
    };
    Client::connect_with_options(&broker.url(), &options)
        .await
        .expect("connect to the test broker")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Send,
    Consume,
    Browse,
    Create,
    Delete,
    Purge,
    Move,
    Retry,
}

const OPS: [Op; 8] = [
    Op::Send,
    Op::Consume,
    Op::Browse,
    Op::Create,
    Op::Delete,
    Op::Purge,
    Op::Move,
    Op::Retry,
];

/// What each user may do under [`SECURITY`]. `operator` may manage but not move
/// or retry: both also need `send` where the messages go.
fn allowed(user: &str) -> &'static [Op] {
    match user {
        "admin" => &OPS,
        "producer" => &[Op::Send, Op::Create],
        "consumer" => &[Op::Consume, Op::Browse, Op::Create],
        "operator" => &[Op::Browse, Op::Delete, Op::Purge],
        _ => &[],
    }
}

/// Every queue with its message count, and every address: what a denial must
/// leave as it was.
async fn state(admin: &Client) -> (Vec<(String, u64)>, Vec<String>) {
    let queues = admin.list_queues().await.unwrap();
    let addresses = admin.list_addresses().await.unwrap();
    (
        queues.into_iter().map(|q| (q.name, q.messages)).collect(),
        addresses.into_iter().map(|a| a.name).collect(),
    )
}

async fn messages(admin: &Client, queue: &str) -> u64 {
    admin.queue(queue).await.unwrap().messages
}

/// Makes sure the state `op` works on is there (as `admin`).
async fn prepare(admin: &Client, op: Op) {
    match op {
        Op::Consume | Op::Purge | Op::Move => {
            if messages(admin, "app.q").await == 0 {
                admin.send(OutgoingMessage::new("app.q", "m")).await.unwrap();
            }
        }
        Op::Create => {
            if admin.queue("app.new").await.is_ok() {
                admin.delete_queue("app.new").await.unwrap();
            }
        }
        Op::Delete => {
            if admin.queue("app.tmp").await.is_err() {
                admin
                    .create_queue("app.side", "app.tmp", RoutingType::Anycast, true)
                    .await
                    .unwrap();
            }
        }
        Op::Retry => {
            if messages(admin, "DLQ").await == 0 {
                admin.send(OutgoingMessage::new("app.q", "dead")).await.unwrap();
                let mut consumer = admin.consume("app.q", 1).await.unwrap();
                let delivery = consumer
                    .next_timeout(Duration::from_secs(10))
                    .await
                    .unwrap()
                    .unwrap();
                consumer
                    .dead_letter(&[delivery.id], "for the test")
                    .await
                    .unwrap();
                consumer.close().await.unwrap();
                assert_eq!(messages(admin, "DLQ").await, 1);
            }
        }
        Op::Send | Op::Browse => {}
    }
}

/// Carries out `op` as `client`; `Err` is a denial's message (PERMISSION_DENIED,
/// or for a retry the reason a message was skipped).
async fn attempt(client: &Client, admin: &Client, op: Op) -> Result<(), String> {
    let denied = |err: Error| match err {
        Error::Status {
            code: Code::PermissionDenied,
            message,
        } => message,
        other => panic!("{op:?}: expected PERMISSION_DENIED, got {other:?}"),
    };
    match op {
        Op::Send => {
            let before = messages(admin, "app.q").await;
            client
                .send(OutgoingMessage::new("app.q", "m"))
                .await
                .map_err(denied)?;
            assert_eq!(messages(admin, "app.q").await, before + 1);
        }
        Op::Consume => {
            let mut consumer = client.consume("app.q", 1).await.map_err(denied)?;
            let delivery = consumer.next_timeout(Duration::from_secs(10)).await.unwrap();
            assert!(delivery.is_some(), "an allowed consumer gets the message");
            consumer.close().await.unwrap();
        }
        Op::Browse => {
            client.browse("app.q", 10).await.map_err(denied)?;
        }
        Op::Create => {
            client
                .create_queue("app.side", "app.new", RoutingType::Anycast, true)
                .await
                .map_err(denied)?;
            assert!(admin.queue("app.new").await.is_ok());
        }
        Op::Delete => {
            client.delete_queue("app.tmp").await.map_err(denied)?;
            assert!(admin.queue("app.tmp").await.is_err());
        }
        Op::Purge => {
            client.purge("app.q").await.map_err(denied)?;
            assert_eq!(messages(admin, "app.q").await, 0);
        }
        Op::Move => {
            let before = messages(admin, "app.other").await;
            let moved = client
                .move_messages(&Selection::new("app.q"), "app.other")
                .await
                .map_err(denied)?;
            assert!(moved > 0);
            assert_eq!(messages(admin, "app.other").await, before + moved);
        }
        Op::Retry => {
            let retried = client
                .retry_messages(&Selection::new("DLQ"), false, 0)
                .await
                .map_err(denied)?;
            if let Some(why) = retried
                .outcomes
                .iter()
                .find(|o| !o.skipped.is_empty())
                .map(|o| o.skipped.clone())
            {
                assert_eq!(retried.moved, 0, "{why}");
                return Err(why);
            }
            assert_eq!(retried.moved, 1);
            assert_eq!(messages(admin, "DLQ").await, 0);
        }
    }
    Ok(())
}

/// The permission a denial of `op` names.
fn permission(op: Op, user: &str) -> &'static str {
    match op {
        Op::Send => "send",
        Op::Consume => "consume",
        Op::Browse => "browse",
        Op::Create => "create-queue",
        Op::Delete => "delete-queue",
        // A move or retry needs `send` where the messages go; operator has `manage`.
        Op::Move | Op::Retry if user == "operator" => "send",
        Op::Purge | Op::Move | Op::Retry => "manage",
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_user_may_do_what_the_security_settings_give_its_roles_and_a_denial_changes_nothing() {
    let broker = Broker::start_with_config(&matrix_config()).await;
    let admin = login(&broker, "admin").await;
    for &(user, _) in USERS {
        let client = login(&broker, user).await;
        for op in OPS {
            prepare(&admin, op).await;
            let before = state(&admin).await;
            let outcome = attempt(&client, &admin, op).await;
            let expected = allowed(user).contains(&op);
            match outcome {
                Ok(()) => assert!(expected, "{user} may not {op:?}, but it went through"),
                Err(message) => {
                    assert!(!expected, "{user} may {op:?}, but was denied: {message}");
                    assert!(
                        message.contains(&format!("user '{user}'"))
                            && message
                                .contains(&format!("`{}` permission on address '", permission(op, user))),
                        "{user} {op:?}: {message}"
                    );
                    assert_eq!(
                        state(&admin).await,
                        before,
                        "{user} {op:?} was denied but changed something"
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_creating_needs_the_create_permissions_and_lists_show_what_one_may_browse() {
    let config = format!(
        "{}{}",
        users(&[
            ("sender", &["sender"]),
            ("creator", &["creator"]),
            ("reader", &["reader"])
        ]),
        r##"
[[security-settings]]
match = "auto.#"
send = ["sender", "creator"]
consume = ["reader", "creator"]
browse = ["creator"]
create-address = ["creator"]
create-queue = ["creator"]
"##
    );
    let broker = Broker::start_with_config(&config).await;
    let (sender, creator, reader) = (
        login(&broker, "sender").await,
        login(&broker, "creator").await,
        login(&broker, "reader").await,
    );
    let names = async |client: &Client| -> Vec<String> {
        client
            .list_addresses()
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.name)
            .collect()
    };

    let err = sender
        .send(OutgoingMessage::new("auto.a", "x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::PermissionDenied), "{err}");
    assert!(
        err.to_string()
            .contains("`create-address` permission on address 'auto.a'"),
        "{err}"
    );
    assert!(
        names(&creator).await.is_empty(),
        "the denied send created nothing"
    );

    creator.send(OutgoingMessage::new("auto.a", "x")).await.unwrap();
    assert_eq!(names(&creator).await, ["auto.a"]);
    assert_eq!(creator.queue("auto.a").await.unwrap().messages, 1);
    // Now it exists, `send` alone will do.
    sender.send(OutgoingMessage::new("auto.a", "y")).await.unwrap();

    let err = reader.consume("auto.b", 1).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::PermissionDenied), "{err}");
    assert!(
        err.to_string().contains("user 'reader' lacks the `create-"),
        "{err}"
    );
    assert_eq!(
        names(&creator).await,
        ["auto.a"],
        "the denied consumer created nothing"
    );
    let mut consumer = reader.consume("auto.a", 1).await.unwrap();
    assert!(
        consumer
            .next_timeout(Duration::from_secs(10))
            .await
            .unwrap()
            .is_some()
    );
    consumer.close().await.unwrap();

    // Lists show only what the caller may browse; reader may browse nothing.
    assert!(reader.list_queues().await.unwrap().is_empty());
    assert!(names(&reader).await.is_empty());
    let queues: Vec<String> = creator
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(queues, ["auto.a"]);
}

/// [`matrix_config`] with `producer` out of `send` and `consumer` out of
/// `consume` on `app.#`, and the user `consumer2` removed.
fn revoked(config: &str) -> String {
    config
        .replace("send = [\"producer\", \"admin\"]", "send = [\"admin\"]")
        .replace("consume = [\"consumer\", \"admin\"]", "consume = [\"admin\"]")
        .replace(&users(&[("consumer2", &["consumer"])]), "")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_that_revokes_a_permission_takes_effect_on_the_next_call() {
    let config = matrix_config();
    let broker = Broker::start_with_config(&config).await;
    let producer = login(&broker, "producer").await;
    producer
        .send(OutgoingMessage::new("app.q", "before"))
        .await
        .unwrap();
    broker.rewrite_config(&revoked(&config));
    broker.hup();
    broker.wait_for_log("config reloaded").await;
    let err = producer
        .send(OutgoingMessage::new("app.q", "after"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::PermissionDenied), "{err}");
    assert!(
        err.to_string()
            .contains("user 'producer' lacks the `send` permission on address 'app.q'"),
        "{err}"
    );
    let admin = login(&broker, "admin").await;
    assert_eq!(admin.queue("app.q").await.unwrap().messages, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn open_consume_streams_that_lost_consume_end_and_their_deliveries_return_uncounted() {
    let config = format!("{}{}", users(&[("consumer2", &["consumer"])]), matrix_config());
    let broker = Broker::start_with_config(&config).await;
    let admin = login(&broker, "admin").await;
    for body in ["one", "two"] {
        admin.send(OutgoingMessage::new("app.q", body)).await.unwrap();
    }
    // Two streams hold a delivery each: one of a user who loses the role's
    // permission, one of a user who is removed. Admin's stream stays.
    let mut held = Vec::new();
    for user in ["consumer", "consumer2"] {
        let mut consumer = login(&broker, user).await.consume("app.q", 1).await.unwrap();
        let delivery = consumer
            .next_timeout(Duration::from_secs(10))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(delivery.delivery_count, 1);
        held.push((user, consumer));
    }
    let mut kept = admin.consume("app.other", 1).await.unwrap();
    assert_eq!(messages(&admin, "app.q").await, 2);

    broker.rewrite_config(&revoked(&config));
    broker.hup();
    for (user, mut consumer) in held {
        let ended = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .unwrap_or_else(|_| panic!("{user}'s stream was not ended"));
        let err = ended.expect_err("the stream ends with an error");
        assert_eq!(err.code(), Some(Code::PermissionDenied), "{user}: {err}");
        assert!(
            err.to_string().contains(&format!(
                "user '{user}' lacks the `consume` permission on address 'app.q'"
            )),
            "{err}"
        );
    }
    // Both deliveries are back, ready, as if never delivered.
    let browsed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let browsed = admin.browse("app.q", 10).await.unwrap();
            if browsed.iter().all(|b| b.state == MessageState::Ready) {
                return browsed;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the deliveries return to the queue");
    assert_eq!(browsed.len(), 2);
    assert!(browsed.iter().all(|b| b.delivery_count == 0), "{browsed:?}");
    let mut again = admin.consume("app.q", 2).await.unwrap();
    for _ in 0..2 {
        let delivery = again
            .next_timeout(Duration::from_secs(10))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            delivery.delivery_count, 1,
            "the lost stream's delivery did not count"
        );
    }

    // A stream whose user keeps `consume` is not touched.
    admin
        .send(OutgoingMessage::new("app.other", "still"))
        .await
        .unwrap();
    let delivery = kept.next_timeout(Duration::from_secs(10)).await.unwrap();
    assert_eq!(
        delivery.expect("admin's stream still delivers").message.body,
        "still"
    );
}

#[tokio::test]
async fn config_resolve_shows_who_may_do_what_and_which_match_decided() {
    let (_dir, path) = temp_file("rebound.toml", &matrix_config());
    let resolve = async |address: &str| {
        let out = rebound([
            "config",
            "resolve",
            "--config",
            path.to_str().unwrap(),
            "--address",
            address,
        ])
        .await;
        out.success();
        out.stdout.clone()
    };
    let out = resolve("app.q").await;
    let row = |key: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no row for {key}:\n{out}"))
            .to_owned()
    };
    assert!(out.contains("decided by match \"app.#\""), "{out}");
    assert!(row("manage").ends_with("operator, admin"), "{out}");
    assert!(row("send").ends_with("producer, admin"), "{out}");
    assert!(
        out.contains("max-delivery-attempts"),
        "the address-settings come first:\n{out}"
    );

    let (_dir, bare) = temp_file("bare.toml", "[[security-settings]]\nmatch = \"app.#\"\n");
    let out = rebound([
        "config",
        "resolve",
        "--config",
        bare.to_str().unwrap(),
        "--address",
        "billing",
    ])
    .await;
    assert!(
        out.success()
            .stdout
            .contains("no entry matches: denied to everyone"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn management_operations_and_denials_are_audited_without_bodies_or_passwords() {
    let broker = Broker::start_with_config(&matrix_config()).await;
    let admin = login(&broker, "admin").await;
    admin
        .send(OutgoingMessage::new("app.q", "TOP-SECRET-BODY"))
        .await
        .unwrap();
    let err = login(&broker, "producer").await.purge("app.q").await.unwrap_err();
    assert_eq!(err.code(), Some(Code::PermissionDenied));
    assert_eq!(login(&broker, "operator").await.purge("app.q").await.unwrap(), 1);

    let log = broker
        .wait_for_log("operation=\"purge\" address=\"app.q\" queue=\"app.q\" messages=1")
        .await;
    let audit: Vec<&str> = log.lines().filter(|l| l.contains("rebound::audit")).collect();
    let purge = audit
        .iter()
        .find(|l| l.contains("operation=\"purge\"") && l.contains("result=\"ok\""))
        .unwrap_or_else(|| panic!("no audit line for the purge:\n{log}"));
    assert!(
        purge.contains("user=\"operator\"") && purge.contains("peer=127.0.0.1:"),
        "{purge}"
    );
    let denial = audit
        .iter()
        .find(|l| l.contains("permission denied") && l.contains("user=\"producer\""))
        .unwrap_or_else(|| panic!("no audit line for the denial:\n{log}"));
    assert!(
        denial.contains("operation=\"purge\"")
            && denial.contains("permission=\"manage\"")
            && denial.contains("peer=127.0.0.1:"),
        "{denial}"
    );
    assert!(!log.contains("TOP-SECRET-BODY"), "a body reached the log:\n{log}");
    assert!(!log.contains(PASSWORD), "a password reached the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_publish_stream_checks_send_on_every_request() {
    let broker = Broker::start_with_config(&matrix_config()).await;
    let admin = login(&broker, "admin").await;
    let publisher = login(&broker, "producer").await.publisher();
    publisher.send(OutgoingMessage::new("app.q", "1")).await.unwrap();
    // Outside app.#: refused alone, the stream carries on.
    let err = publisher
        .send(OutgoingMessage::new("DLQ", "x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::PermissionDenied), "{err}");
    publisher.send(OutgoingMessage::new("app.q", "2")).await.unwrap();
    // Concurrent sends share frames; the refused one fails alone.
    let sends = ["app.q", "DLQ", "app.q"].map(|address| publisher.send(OutgoingMessage::new(address, "c")));
    let results = futures::future::join_all(sends).await;
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert_eq!(
        results[1].as_ref().unwrap_err().code(),
        Some(Code::PermissionDenied)
    );
    assert_eq!(messages(&admin, "app.q").await, 4);
    assert_eq!(messages(&admin, "DLQ").await, 0);

    let nobody = login(&broker, "nobody").await.publisher();
    let err = nobody.send(OutgoingMessage::new("app.q", "x")).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::PermissionDenied), "{err}");
    assert_eq!(messages(&admin, "app.q").await, 4);
}
