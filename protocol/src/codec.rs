//! The codec of the generated services and clients: prost's, except that a message
//! that does not decode (a string field that is not UTF-8, a truncated field) is
//! `INVALID_ARGUMENT` rather than prost's `INTERNAL`, and that a message is
//! encoded into room made for all of it at once.
//!
//! A request that does not decode is the sender's mistake, and `INTERNAL` would
//! tell a client the broker is broken and retrying may help. Generated code on
//! both sides uses it (`build.rs`, `codec_path`): a client that cannot decode the
//! broker's answer gets `INVALID_ARGUMENT` too, with prost's words for what failed.
use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// [`ProstCodec`] with decode failures as `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct ProtoCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for ProtoCodec<T, U> {
    fn default() -> Self {
        Self(ProstCodec::default())
    }
}

impl<T, U> Codec for ProtoCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProtoEncoder<T>;
    type Decoder = ProtoDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProtoEncoder(self.0.encoder())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProtoDecoder(self.0.decoder())
    }
}

/// [`ProstEncoder`] that reserves a message's encoded length before writing it.
///
/// tonic's buffer starts at 8 KiB and prost writes field by field, so a batch
/// of deliveries or a Publish frame of 64 KiB would otherwise grow the buffer
/// several times, copying what was written each time.
#[derive(Debug, Clone)]
pub struct ProtoEncoder<T>(ProstEncoder<T>);

impl<T: Message> Encoder for ProtoEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        self.0.encode(item, buf)
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

/// [`ProstDecoder`] with decode failures as `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct ProtoDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for ProtoDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        // ProstDecoder fails only on a prost::DecodeError, whose words (the field
        // path and what is wrong) are short and name no input.
        self.0
            .decode(buf)
            .map_err(|status| Status::invalid_argument(status.message()))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
