//! The HTTP endpoint: health probes and Prometheus metrics, as an operator's
//! tools see them.
use crate::support::{Broker, http_get};

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
