//! rebound's gRPC API, package `rebound.v1`.
//!
//! The `.proto` files under `proto/` are the contract and are documented field by
//! field; this crate only compiles them (with protox, so building needs no system
//! `protoc`) and re-exports the generated types, clients and servers. Two services:
//! `Messaging` (send, consume) and `Admin` (addresses, queues, counters, browse,
//! settings). [`properties`] names the message properties the broker sets and
//! reserves (`_AMQ_*`, `_REBOUND_*`). The services use [`codec::ProtoCodec`], which
//! answers a message that does not decode with `INVALID_ARGUMENT`.
//!
//! | file | what |
//! |---|---|
//! | `codec.rs` | the codec of the services: prost's, with `INVALID_ARGUMENT` for what does not decode |
//! | `properties.rs` | the names of the message properties the broker sets or reserves |

pub mod codec;
pub mod properties;

/// The largest HTTP/2 frame the broker and the Rust client accept (the
/// protocol's default is 16 KiB), each advertising it to the other: a batch of
/// messages, published or delivered, then goes in one frame and one write, and
/// is read in a few reads, rather than one write per 16 KiB and one read per 8.
/// The streams' flow-control windows, not this, bound what a connection may
/// hold.
pub const MAX_FRAME_BYTES: u32 = 256 << 10;

/// Generated code for package `rebound.v1`.
pub mod v1 {
    tonic::include_proto!("rebound.v1");

    /// The encoded file descriptor set of the API, served by gRPC reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("rebound_descriptor");
}
