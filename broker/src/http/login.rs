//! The login of the HTTP endpoint: HTTP basic against the broker's users, through
//! [`Authenticator::admit`](crate::security::Authenticator::admit), the very check
//! gRPC calls make (same credential cache, same slowdown of a guessing peer, same
//! audit line for a refusal). A refusal answers `401` with
//! `WWW-Authenticate: Basic realm="rebound"`, so that a browser asks for a user
//! name and password; an unknown user and a wrong password read the same.
//! Client certificates do not apply: the endpoint has no TLS.
//!
//! Handlers take the [`Caller`] (the principal the login found, and the peer) as
//! an extractor, for the permission checks of `security::access`.
use std::convert::Infallible;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{HttpState, Peer};
use crate::security::Principal;
use crate::security::access::Caller;

/// What a refusal asks the browser for.
pub const CHALLENGE: &str = "Basic realm=\"rebound\"";

/// The middleware in front of every operator route.
pub async fn login(State(state): State<HttpState>, mut request: Request, next: Next) -> Response {
    let peer = peer(request.extensions());
    match state.authenticator.admit(&mut request, peer, None).await {
        Ok(()) => next.run(request).await,
        Err(refused) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, CHALLENGE)],
            format!("{refused}\n"),
        )
            .into_response(),
    }
}

fn peer(extensions: &axum::http::Extensions) -> Option<SocketAddr> {
    extensions
        .get::<ConnectInfo<Peer>>()
        .map(|ConnectInfo(peer)| peer.addr)
}

impl FromRequestParts<HttpState> for Caller {
    type Rejection = Infallible;

    /// The caller the login admitted; a request it did not see (none reaches a
    /// handler that way) counts as anonymous, which holds nothing once users exist.
    async fn from_request_parts(parts: &mut Parts, _: &HttpState) -> Result<Caller, Infallible> {
        Ok(Caller {
            principal: parts
                .extensions
                .get::<Principal>()
                .cloned()
                .unwrap_or(Principal::Anonymous),
            peer: peer(&parts.extensions),
        })
    }
}
