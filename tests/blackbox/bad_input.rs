//! Oversized and malformed input over gRPC: reasons are cut rather than refused,
//! size limits are checked up front and named, every refusal is a status a client
//! can act on (`INVALID_ARGUMENT`, not `INTERNAL`) with a message that fits a
//! header, and no message goes missing.
use bytes::{Buf, BufMut};
use rebound_client::{Code, OutgoingMessage};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::{Request, Status};

use crate::messaging::body;
use crate::redelivery::{next, text};
use crate::support::{Broker, cli};

const WITH_DLQ: &str = r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"
max-delivery-attempts = 5

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
"##;

#[tokio::test(flavor = "multi_thread")]
async fn long_failure_reasons_are_cut_and_the_message_is_never_lost() {
    let broker = Broker::start_with_config(WITH_DLQ).await;
    let client = broker.client().await;
    client
        .send(OutgoingMessage::new("orders", "poison"))
        .await
        .unwrap();
    let mut consumer = client.consume("orders", 10).await.unwrap();
    let long = "x".repeat(100 * 1024);
    for attempt in 1..=3 {
        let d = next(&mut consumer).await;
        assert_eq!(d.delivery_count, attempt);
        consumer.nack(&[d.id], &long).await.unwrap();
        consumer.flush().await.expect("a long nack reason is kept, cut");
    }
    let d = next(&mut consumer).await;
    consumer.dead_letter(&[d.id], &"y".repeat(1 << 20)).await.unwrap();
    consumer
        .flush()
        .await
        .expect("a long dead-letter reason is kept, cut");

    let orders = client.queue("orders").await.unwrap();
    assert_eq!((orders.messages, orders.dead_lettered), (0, 1));
    let mut dlq = client.consume("DLQ", 10).await.unwrap();
    let dead = next(&mut dlq).await;
    assert_eq!(body(&dead), "poison");
    let reason = text(&dead, "_REBOUND_DEAD_LETTER_REASON");
    assert_eq!(
        reason,
        format!(
            "rejected: {}…[truncated {} bytes]",
            "y".repeat(1024),
            (1 << 20) - 1024
        )
    );
    let failures: serde_json::Value = serde_json::from_str(&text(&dead, "_REBOUND_FAILURES")).unwrap();
    let cut = format!("{}…[truncated {} bytes]", "x".repeat(1024), 100 * 1024 - 1024);
    assert_eq!(failures.as_array().unwrap().len(), 3);
    assert!(
        failures
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["reason"] == cut.as_str()),
        "{failures}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sizes_are_checked_up_front_and_name_their_limit() {
    let broker = Broker::start_with_config(WITH_DLQ).await;
    let client = broker.client().await;
    let err = client
        .send(OutgoingMessage::new("big", "x").property("blob", "p".repeat(900 * 1024)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    assert!(err.to_string().contains("65536"), "the limit is named: {err}");

    // max-message-size (1 MiB by default) counts the body and the properties.
    client
        .send(OutgoingMessage::new("big", vec![1u8; 1 << 20]))
        .await
        .unwrap();
    let err = client
        .send(OutgoingMessage::new("big", vec![1u8; 1 << 20]).property("k", "v"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    assert!(err.to_string().contains("1048576"), "the limit is named: {err}");

    // The largest properties accepted still leave room for a dead letter's.
    client
        .send(OutgoingMessage::new("big", "p").property("blob", "p".repeat(60 * 1024)))
        .await
        .unwrap();
    let mut consumer = client.consume("big", 10).await.unwrap();
    for _ in 0..2 {
        let d = next(&mut consumer).await;
        consumer.dead_letter(&[d.id], &"z".repeat(5000)).await.unwrap();
    }
    consumer.flush().await.unwrap();
    assert_eq!(client.queue("DLQ").await.unwrap().messages, 2);
    assert!(!broker.log().contains("storage failure"), "{}", broker.log());
}

/// Sends protobuf bytes as they are, so that a test can send what the generated
/// types cannot express (a string field that is not UTF-8).
#[derive(Clone, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

/// Field 1, length-delimited, holding `value`.
fn field1(value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x0a, u8::try_from(value.len()).unwrap()];
    out.extend_from_slice(value);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_string_that_is_not_utf8_is_an_invalid_argument() {
    let broker = Broker::start().await;
    let channel = tonic::transport::Endpoint::from_shared(broker.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let not_utf8 = [b'q', 0xff, 0xfe];
    // SendRequest.messages[0].address; GetQueueRequest.queue; ConsumeRequest.subscribe.queue.
    let calls = [
        ("/rebound.v1.Messaging/Send", field1(&field1(&not_utf8))),
        ("/rebound.v1.Admin/GetQueue", field1(&not_utf8)),
    ];
    for (path, request) in calls {
        grpc.ready().await.unwrap();
        let status = grpc
            .unary(Request::new(request), PathAndQuery::from_static(path), Raw)
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{path}: {status:?}");
    }
    grpc.ready().await.unwrap();
    let subscribe = tokio_stream::iter([field1(&field1(&not_utf8))]);
    let status = grpc
        .streaming(
            Request::new(subscribe),
            PathAndQuery::from_static("/rebound.v1.Messaging/Consume"),
            Raw,
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    // The broker is fine.
    let client = broker.client().await;
    client.send(OutgoingMessage::new("q", "ok")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_quote_a_bounded_part_of_the_input() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    client.send(OutgoingMessage::new("safe", "kept")).await.unwrap();
    let deep = format!("{}a = 1{}", "(".repeat(10_000), ")".repeat(10_000));
    let short = |err: &rebound_client::Error| err.to_string().len() < 1024;

    let err = client.browse_filtered("safe", &deep, 10).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    assert!(short(&err), "{err}");
    let err = client
        .consumer("safe")
        .filter(deep.clone())
        .open()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    assert!(short(&err), "{err}");
    let err = client.queue(&"q".repeat(100_000)).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::NotFound), "{err}");
    assert!(short(&err), "{err}");
    let err = client
        .send(OutgoingMessage::new("a".repeat(100_000), "x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    assert!(short(&err), "{err}");

    let out = cli(&broker, ["receive", "--queue", "safe", "--filter", &deep]).await;
    assert!(
        out.failure(1).stderr.contains("(INVALID_ARGUMENT)"),
        "{}",
        out.stderr
    );
    assert_eq!(client.queue("safe").await.unwrap().messages, 1);
}
