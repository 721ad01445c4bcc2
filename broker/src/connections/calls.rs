//! A call under way, held until its response is done: for a streaming call
//! (a consumer, a Publish stream) that is as long as the stream is open, so a
//! connection with one is busy, never idle, and never gives way.
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

use super::registry::Call;

/// A response body that keeps its call counted until it is dropped.
pub struct Tracked<B> {
    body: B,
    _call: Option<Call>,
}

impl<B> Tracked<B> {
    pub fn new(body: B, call: Option<Call>) -> Tracked<B> {
        Tracked { body, _call: call }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
