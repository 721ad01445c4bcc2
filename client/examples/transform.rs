//! Transactional consume-transform-produce with a transacted [`Listener`].
//!
//! Each order from queue `orders` is handled in its own transaction: the invoice
//! the handler sends to `invoices` and the ack of the order commit together, so an
//! order is never invoiced twice nor lost — if the handler fails, the invoice is
//! discarded and the order redelivered.
//!
//! Run a broker, then the example; stop it with Ctrl-C:
//!
//! ```text
//! cargo run --release -- serve
//! cargo run -p rebound-client --example transform [http://127.0.0.1:61616]
//! ```
use rebound_client::{Client, DEFAULT_URL, HandlerError, Incoming, Listener, OutgoingMessage, RoutingType};

async fn invoice(incoming: Incoming) -> Result<(), HandlerError> {
    let tx = incoming.transaction().expect("the listener is transacted");
    let order =
        std::str::from_utf8(&incoming.message.body).map_err(|_| HandlerError::permanent("not UTF-8"))?;
    let Some(amount) = order.strip_prefix("order:").and_then(|a| a.parse::<u64>().ok()) else {
        return Err(HandlerError::permanent(format!("not an order: {order:?}")));
    };
    tx.send(OutgoingMessage::new(
        "invoices",
        format!("invoice for {amount} + {} tax", amount / 5),
    ))
    .await?;
    println!("invoiced {order}");
    Ok(())
}

#[tokio::main]
async fn main() -> rebound_client::Result<()> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let url = std::env::args().nth(1).unwrap_or_else(|| DEFAULT_URL.to_owned());
    let client = Client::connect(&url).await?;
    for queue in ["orders", "invoices"] {
        if let Err(err) = client
            .create_queue(queue, queue, RoutingType::Anycast, true)
            .await
        {
            println!("queue '{queue}': {err}");
        }
    }
    let orders = ["order:100", "order:250", "oops", "order:40"];
    client
        .send_batch(orders.map(|o| OutgoingMessage::new("orders", o)).to_vec())
        .await?;

    let listener = Listener::builder(client, "orders")
        .concurrency(2)
        .transacted(true)
        .start(invoice);
    tokio::signal::ctrl_c().await.ok();
    println!("{:?}", listener.stop().await);
    Ok(())
}
