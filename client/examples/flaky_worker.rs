//! A worker whose dependency fails now and then, run by a [`Listener`].
//!
//! A flaky dependency answers [`HandlerError::retry_after`]: the message is
//! redelivered later while the worker goes on with the others. A malformed message
//! is dead-lettered at once; a bug (here: a panic) nacks the message, which is
//! dead-lettered after `max-delivery-attempts`, and the worker keeps running.
//!
//! Run a broker, then the example (it creates the queue and sends a few jobs);
//! stop it with Ctrl-C:
//!
//! ```text
//! cargo run --release -- serve
//! cargo run -p rebound-client --example flaky_worker [http://127.0.0.1:61616]
//! ```
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rebound_client::{Client, DEFAULT_URL, HandlerError, Incoming, Listener, OutgoingMessage, RoutingType};

/// Calls to the pretend dependency; every third one fails.
static CALLS: AtomicU32 = AtomicU32::new(0);

async fn call_dependency(job: &str) -> Result<String, HandlerError> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    if CALLS.fetch_add(1, Ordering::Relaxed) % 3 == 2 {
        return Err(HandlerError::retry_after(
            "inventory service unavailable",
            Duration::from_millis(500),
        ));
    }
    Ok(format!("{job} done"))
}

async fn handle(incoming: Incoming) -> Result<(), HandlerError> {
    let job = std::str::from_utf8(&incoming.message.body)
        .map_err(|_| HandlerError::permanent("the job is not UTF-8"))?;
    if job.is_empty() {
        return Err(HandlerError::permanent("empty job"));
    }
    if job == "bug" {
        panic!("a bug in the worker");
    }
    let result = call_dependency(job).await?;
    println!(
        "{result} (delivery {}, redelivered: {})",
        incoming.delivery_count, incoming.redelivered
    );
    Ok(())
}

#[tokio::main]
async fn main() -> rebound_client::Result<()> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let url = std::env::args().nth(1).unwrap_or_else(|| DEFAULT_URL.to_owned());
    let client = Client::connect(&url).await?;
    if let Err(err) = client
        .create_queue("jobs", "jobs", RoutingType::Anycast, true)
        .await
    {
        println!("queue 'jobs': {err}");
    }
    let jobs = (0..10)
        .map(|i| format!("job {i}"))
        .chain(["".to_owned(), "bug".to_owned()]);
    client
        .send_batch(jobs.map(|job| OutgoingMessage::new("jobs", job)).collect())
        .await?;

    let listener = Listener::builder(client, "jobs").concurrency(4).start(handle);
    tokio::signal::ctrl_c().await.ok();
    println!("{:?}", listener.stop().await);
    Ok(())
}
