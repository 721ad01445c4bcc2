//! What only [`PostgresStore`] does: the database going away and coming
//! back (the store reaches the test database through a proxy,
//! [`DatabaseProxy`], that the test cuts and resumes), commits in order, and
//! TLS to the database, with a client certificate for a role that logs in
//! only with one (`.ci/postgres.sh` serves it).

mod pg;

use std::time::{Duration, Instant};

use bytes::Bytes;
use pg::{DatabaseProxy, TestSchema};
use rebound_storage::{
    ClientIdentity, MessageRecord, Op, PostgresOptions, PostgresStore, QueueRecord, StorageError, Store,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Queue 1, `q`.
fn queue_q() -> Op {
    Op::PutQueue(QueueRecord {
        id: 1,
        name: "q".into(),
        ..Default::default()
    })
}

/// The certificates of a PEM file.
fn certificates(path: &std::path::Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .unwrap()
}

fn put(id: u64) -> Op {
    Op::PutMessage {
        queue: 1,
        message: MessageRecord {
            message_id: id,
            body: Bytes::from_static(b"body"),
            durable: true,
            ..Default::default()
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_fail_unavailable_while_the_database_is_away_and_work_again_once_it_is_back() {
    let Some(schema) = TestSchema::create("postgres outage") else {
        return;
    };
    let mut proxy = DatabaseProxy::start(&schema).await;
    let store = PostgresStore::open(&PostgresOptions::new(proxy.url())).unwrap();
    store.commit(vec![queue_q(), put(1)]).await.unwrap();

    proxy.cut().await;
    let failed = store.commit(vec![put(2)]).await;
    assert!(matches!(failed, Err(StorageError::Unavailable(_))), "{failed:?}");
    let failed = store.commit(vec![put(3)]).await;
    assert!(matches!(failed, Err(StorageError::Unavailable(_))), "{failed:?}");

    proxy.resume().await;
    // The same store, not reopened: the next group connects again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match store.commit(vec![put(4)]).await {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("still failing once the database is back: {e}"),
        }
    }
    let store2 = std::sync::Arc::new(store);
    let recovered = tokio::task::spawn_blocking(move || store2.recover())
        .await
        .unwrap()
        .unwrap();
    let ids: Vec<u64> = recovered.queues[0].messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 4], "what failed is not stored");
}

/// Groups in the database at once must not reorder commits that touch the
/// same rows: a send, then its ack issued before the send's group is done,
/// leave nothing behind; a state written after its message stays with it.
/// (Without the footprint check, acks overtake their sends here every run.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_touching_the_same_rows_apply_in_order_whatever_is_in_flight() {
    let Some(schema) = TestSchema::create("postgres ordering") else {
        return;
    };
    let store = PostgresStore::open(&PostgresOptions::new(schema.url())).unwrap();
    store.commit(vec![queue_q()]).await.unwrap();
    let state = rebound_storage::DeliveryState {
        delivery_count: 2,
        ..Default::default()
    };
    let mut pending = Vec::new();
    for id in 1..=300 {
        pending.push(store.commit(vec![put(id)]));
        // Let the committer take the put alone, now and then.
        for _ in 0..(id % 4) * 50 {
            std::hint::spin_loop();
        }
        if id % 3 == 0 {
            pending.push(store.commit(vec![Op::PutState {
                queue: 1,
                id,
                state: state.clone(),
            }]));
        } else {
            pending.push(store.commit(vec![Op::RemoveMessage { queue: 1, id }]));
        }
        if id % 50 == 0 {
            for commit in pending.drain(..) {
                commit.await.unwrap();
            }
        }
    }
    let recovered = store.recover().unwrap();
    let left: Vec<u64> = recovered.queues[0].messages.iter().map(|m| m.id).collect();
    assert_eq!(left, (1..=100).map(|i| i * 3).collect::<Vec<_>>());
    assert!(
        recovered.queues[0]
            .messages
            .iter()
            .all(|m| m.state.as_ref() == Some(&state))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_ca_every_connection_is_encrypted_and_the_server_verified() {
    let test = "postgres tls";
    let Some(schema) = TestSchema::create(test) else {
        return;
    };
    let Some(ca_file) = pg::database_ca_file(test) else {
        return;
    };
    let ca = certificates(&ca_file);
    // A name of its own, to find this store's connections among the suite's.
    let name = format!("rebound_tls_{}", std::process::id());
    let url = format!("{}&application_name={name}", schema.url());
    let mut options = PostgresOptions::new(url.clone());
    options.tls_roots = Some(ca);
    let store = PostgresStore::open(&options).unwrap();
    store.commit(vec![queue_q(), put(1)]).await.unwrap();
    assert!(store.read_message(1, 1).unwrap().is_some());
    let connections = |ssl: bool| {
        schema.query_i64(&format!(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = '{name}' AND s.ssl = {ssl}"
        ))
    };
    assert!(connections(true) >= 1, "no encrypted connection of the store");
    assert_eq!(connections(false), 0, "a plain connection of the store");
    store.close().unwrap();

    // A CA that did not sign the server's certificate: refused at open, saying why.
    let stranger = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let mut wrong = PostgresOptions::new(url);
    wrong.tls_roots = Some(vec![stranger.cert.der().clone()]);
    let refused = PostgresStore::open(&wrong)
        .err()
        .expect("an unknown issuer is refused");
    assert!(refused.to_string().contains("certificate"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_demands_a_client_certificate_gets_it_on_every_connection() {
    let Some(login) = pg::cert_login("postgres client certificate") else {
        return;
    };
    let identity = ClientIdentity {
        chain: certificates(&login.cert),
        key: PrivateKeyDer::from_pem_file(&login.key).unwrap(),
    };
    let mut options = PostgresOptions::new(login.url.clone());
    options.tls_roots = Some(certificates(&login.ca));
    options.tls_client = Some(identity.clone());
    let store = PostgresStore::open(&options).unwrap();
    // The connection that LISTENs is one of its own: a notification it
    // passes on shows that it logged in with the certificate too.
    let mut notices = store.metadata_notices();
    let listening = async {
        loop {
            store.commit(vec![queue_q()]).await.unwrap();
            if let Ok(notice) = tokio::time::timeout(Duration::from_millis(200), notices.recv()).await {
                return notice;
            }
        }
    };
    let notice = tokio::time::timeout(Duration::from_secs(20), listening).await;
    assert!(matches!(notice, Ok(Some(_))), "no notification: {notice:?}");
    store.commit(vec![Op::DeleteQueue(1)]).await.unwrap();
    store.close().unwrap();

    // Without the certificate the server refuses the broker, and says why.
    let mut without = options.clone();
    without.tls_client = None;
    let refused = PostgresStore::open(&without)
        .err()
        .expect("refused without a certificate");
    assert!(
        refused
            .to_string()
            .contains("connection requires a valid client certificate"),
        "{refused}"
    );

    // A key that is not the certificate's: refused at open, naming the keys.
    let stranger = rcgen::generate_simple_self_signed(vec!["rebound_cert".to_owned()]).unwrap();
    let mut mismatched = options;
    mismatched.tls_client = Some(ClientIdentity {
        chain: identity.chain,
        key: PrivateKeyDer::try_from(stranger.signing_key.serialize_der()).unwrap(),
    });
    let refused = PostgresStore::open(&mismatched)
        .err()
        .expect("a key that does not fit is refused");
    assert!(
        refused.to_string().contains("postgres-client-key-file"),
        "{refused}"
    );
}
