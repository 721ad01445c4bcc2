//! A caller named by another node of the cluster, which forwarded its call
//! here (`grpc/cluster/proxy.rs`) and vouches for it.
//!
//! A caller who logged in with a password is forwarded with its
//! `authorization` metadata and logs in here again. One who logged in with a
//! client certificate cannot be: the certificate belongs to its own TLS
//! connection. So the forwarding node, which authenticated the caller,
//! names it in [`CALLER_HEADER`] and proves that it is a node with the
//! cluster's shared secret in [`SECRET_HEADER`] (`[cluster] secret-file`).
//!
//! The trust boundary: a node that holds the secret may speak for any user,
//! as it could by serving that user's calls itself. The name is accepted
//! only with the right secret (compared in constant time); a call that
//! carries either header without the secret this node holds is refused and
//! written to the audit log, whatever else it brings. The secret goes only
//! over TLS to a node verified against the cluster's CA (the config refuses
//! `secret-file` without `[tls]`). Here the named user is authorized as
//! usual, with the roles this node's config gives it; a name that is not a
//! user here is refused.
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use subtle::ConstantTimeEq;
use tonic::metadata::{MetadataMap, MetadataValue};

/// The forwarded caller's user name, base64url of its UTF-8.
pub const CALLER_HEADER: &str = "rebound-forwarded-caller";

/// The cluster's shared secret, proving that the sender is a node.
pub const SECRET_HEADER: &str = "rebound-node-secret";

/// The cluster's shared secret (`[cluster] secret-file`).
pub struct NodeSecret {
    secret: String,
}

impl std::fmt::Debug for NodeSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeSecret(..)")
    }
}

/// Why a call naming a forwarded caller was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a forwarded caller is accepted only from a node of this cluster (wrong or missing cluster secret)")]
pub struct NotANode;

impl NodeSecret {
    /// Reads `[cluster] secret-file`; the error names the file and what is wrong.
    pub fn read(path: &Path) -> Result<NodeSecret, String> {
        rebound_config::cluster::read_secret(path).map(|secret| NodeSecret { secret })
    }

    /// Names `user` in the metadata of a call forwarded to another node, with
    /// the secret that makes that node believe it.
    pub fn vouch(&self, metadata: &mut MetadataMap, user: &str) {
        let name = URL_SAFE_NO_PAD.encode(user);
        metadata.insert(
            CALLER_HEADER,
            MetadataValue::try_from(name).expect("base64 is valid metadata"),
        );
        metadata.insert(
            SECRET_HEADER,
            MetadataValue::try_from(self.secret.as_str()).expect("the config checked it is visible ASCII"),
        );
    }

    fn matches(&self, given: &[u8]) -> bool {
        // In constant time: how much of a guess is right must not show in
        // how long the refusal takes.
        self.secret.as_bytes().ct_eq(given).into()
    }
}

/// The caller another node names in `headers`: `None` when they name none
/// (neither header), the user name when the secret is `secret`'s, else
/// [`NotANode`] (also without a secret here, or with a name that does not
/// decode).
pub fn caller(headers: &http::HeaderMap, secret: Option<&NodeSecret>) -> Option<Result<String, NotANode>> {
    let name = headers.get(CALLER_HEADER);
    let given = headers.get(SECRET_HEADER);
    if name.is_none() && given.is_none() {
        return None;
    }
    let vouched = match (secret, given) {
        (Some(secret), Some(given)) => secret.matches(given.as_bytes()),
        _ => false,
    };
    let name = name
        .filter(|_| vouched)
        .and_then(|name| URL_SAFE_NO_PAD.decode(name.as_bytes()).ok())
        .and_then(|name| String::from_utf8(name).ok());
    Some(name.ok_or(NotANode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> NodeSecret {
        NodeSecret { secret: text.into() }
    }

    /// The http headers of a request carrying `metadata`.
    fn headers(metadata: MetadataMap) -> http::HeaderMap {
        metadata.into_headers()
    }

    #[test]
    fn a_vouched_caller_is_named_only_with_the_same_secret() {
        let ours = secret("0123456789abcdef0123456789abcdef");
        let mut metadata = MetadataMap::new();
        ours.vouch(&mut metadata, "billing service é");
        let vouched = headers(metadata);
        assert_eq!(
            caller(&vouched, Some(&ours)),
            Some(Ok("billing service é".to_owned()))
        );
        for other in [
            "0123456789abcdef0123456789abcdeF",
            "0123456789abcdef0123456789abcde",
            "",
        ] {
            assert_eq!(
                caller(&vouched, Some(&secret(other))),
                Some(Err(NotANode)),
                "{other}"
            );
        }
        assert_eq!(caller(&vouched, None), Some(Err(NotANode)));
        assert_eq!(caller(&http::HeaderMap::new(), Some(&ours)), None);
    }

    #[test]
    fn either_header_alone_is_refused() {
        let ours = secret("0123456789abcdef0123456789abcdef");
        let mut name_only = http::HeaderMap::new();
        name_only.insert(CALLER_HEADER, URL_SAFE_NO_PAD.encode("admin").parse().unwrap());
        assert_eq!(caller(&name_only, Some(&ours)), Some(Err(NotANode)));
        let mut secret_only = http::HeaderMap::new();
        secret_only.insert(SECRET_HEADER, ours.secret.parse().unwrap());
        assert_eq!(caller(&secret_only, Some(&ours)), Some(Err(NotANode)));
    }
}
