//! The `[cluster]` table: this broker is one node of several sharing one
//! PostgreSQL database (`storage = "postgres"`).
//!
//! ```toml
//! [cluster]
//! node-id = "node-1"                 # required: unique among the nodes, stable across restarts
//! advertise = "10.0.0.1:61616"       # how the other nodes reach this one's gRPC (default: listen)
//! lease = "10s"                      # how long a node owns its queues without a heartbeat
//! ca-file = "/etc/rebound/nodes.pem" # with [tls]: CAs the other nodes' certificates chain to
//! secret-file = "/etc/rebound/cluster.secret" # with [tls]: lets nodes vouch for callers
//! ```
//!
//! A node forwards a call for a queue another node serves to that node
//! (`advertise`). With `[tls]` the nodes serve TLS, so a node reaches the
//! others over TLS too: their certificates must chain to `ca-file` (by
//! default `[tls] client-ca-file`, the CA of a mutual-TLS setup, which one
//! CA usually shares with the nodes' certificates) and name the host of
//! their `advertise` address; and it presents its own `[tls]` certificate,
//! for nodes that demand client certificates. Hence `ca-file` needs `[tls]`,
//! and `[tls]` in a cluster needs a CA, one or the other.
//!
//! A caller who logged in with a client certificate cannot be forwarded
//! with its credentials (the certificate stays with its TLS connection), so
//! the forwarding node vouches for it: it names the caller to the serving
//! node with the cluster's shared secret, `secret-file` (one line of at
//! least [`MIN_SECRET_BYTES`] characters, the same file on every node), which
//! proves it is a node. Whoever holds the secret can speak for every user,
//! so it goes only over TLS (`secret-file` needs `[tls]`) and the file must
//! be readable by the broker alone.
//!
//! The node id must stay the same across restarts of one node: a node that
//! starts again under its id knows its previous process is gone and takes
//! back its own leases at once rather than waiting for them to expire. Two
//! running nodes with one id would both believe they own the same queues, so
//! the id is the operator's promise of uniqueness. `storage = "postgres"` is
//! the daemon's check (as for `postgres-url`, the command line may set it).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::check;
use crate::error::{ConfigError, Document};
use crate::tls::{TlsConfig, certificate_file};

/// Leases `lease` accepts: at least 1 s (a node renews every third of it,
/// and must notice a failed renewal before it lapses), at most 10 minutes
/// (the longest a dead node's queues wait for another).
pub const CLUSTER_LEASE_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(600);

/// The lease when `lease` is absent: 10 s.
pub const DEFAULT_CLUSTER_LEASE: Duration = Duration::from_secs(10);

/// The longest `node-id`, in bytes: it is stored with every lease row.
pub const MAX_NODE_ID_BYTES: usize = 64;

/// The validated `[cluster]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// This node's id (`node-id`).
    pub node_id: String,
    /// `host:port` other nodes use for this node's gRPC (`advertise`);
    /// `None` = the listen address.
    pub advertise: Option<String>,
    /// How long a lease lasts without renewal (`lease`).
    pub lease: Duration,
    /// PEM file with the CAs the other nodes' certificates must chain to
    /// (`ca-file`, only with `[tls]`); `None` = `[tls] client-ca-file`.
    pub ca_file: Option<PathBuf>,
    /// The file of the cluster's shared secret (`secret-file`, only with
    /// `[tls]`), read and checked as the config loads; `None` = nodes do not
    /// vouch for callers.
    pub secret_file: Option<PathBuf>,
}

/// `[cluster]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawCluster {
    node_id: Option<Spanned<String>>,
    advertise: Option<Spanned<String>>,
    lease: Option<Spanned<String>>,
    ca_file: Option<Spanned<PathBuf>>,
    secret_file: Option<Spanned<PathBuf>>,
}

impl RawCluster {
    /// Validates the table at `table_start` (the offset of `[cluster]`),
    /// beside the broker's validated `[tls]`.
    pub(crate) fn validate(
        self,
        doc: &Document<'_>,
        table_start: usize,
        tls: Option<&TlsConfig>,
    ) -> Result<ClusterConfig, ConfigError> {
        let node_id =
            check::checked(doc, self.node_id, node_id, || "cluster.node-id".into())?.ok_or_else(|| {
                doc.error(
                    table_start,
                    Some("cluster.node-id".into()),
                    "[cluster] needs `node-id`, this node's unique and stable name",
                )
            })?;
        let ca_start = self.ca_file.as_ref().map(|value| value.span().start);
        let ca_file = check::checked(doc, self.ca_file, certificate_file, || "cluster.ca-file".into())?;
        match (tls, ca_start) {
            (None, Some(ca_start)) => {
                return Err(doc.error(
                    ca_start,
                    Some("cluster.ca-file".into()),
                    "needs [tls]: nodes reach each other over TLS when they serve it, and in \
                     plaintext otherwise",
                ));
            }
            (Some(tls), None) if tls.client_ca_file.is_none() => {
                return Err(doc.error(table_start, Some("cluster.ca-file".into()), NEEDS_A_CA));
            }
            _ => {}
        }
        let secret_start = self.secret_file.as_ref().map(|value| value.span().start);
        let secret_file = check::checked(doc, self.secret_file, secret_file, || {
            "cluster.secret-file".into()
        })?;
        if let (None, Some(secret_start)) = (tls, secret_start) {
            return Err(doc.error(
                secret_start,
                Some("cluster.secret-file".into()),
                "needs [tls]: the secret goes with forwarded calls, and must not cross the \
                 network in plaintext",
            ));
        }
        Ok(ClusterConfig {
            node_id,
            ca_file,
            secret_file,
            advertise: check::checked(doc, self.advertise, check::host_port, || {
                "cluster.advertise".into()
            })?,
            lease: check::checked(doc, self.lease, lease, || "cluster.lease".into())?
                .unwrap_or(DEFAULT_CLUSTER_LEASE),
        })
    }
}

/// Why a node with `[tls]` needs `[cluster] ca-file` or `[tls] client-ca-file`
/// (also the daemon's words when `--node-id` makes the node).
pub const NEEDS_A_CA: &str = "with [tls], a node reaches the other nodes over TLS and needs the CA \
     their certificates chain to: set `ca-file` in [cluster], or `client-ca-file` in [tls]";

/// The shortest shared secret `secret-file` may hold, in bytes: 32 random
/// characters are beyond guessing.
pub const MIN_SECRET_BYTES: usize = 32;

/// Reads the cluster's shared secret: the file's first line, which must
/// hold at least [`MIN_SECRET_BYTES`] visible ASCII characters (it travels
/// as gRPC metadata).
pub fn read_secret(path: &std::path::Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read file: {e}", path.display()))?;
    let secret = text.lines().next().unwrap_or_default().trim();
    if secret.len() < MIN_SECRET_BYTES || !secret.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{}: the first line must be a secret of at least {MIN_SECRET_BYTES} visible ASCII \
             characters (e.g. `openssl rand -base64 33`)",
            path.display()
        ));
    }
    Ok(secret.to_owned())
}

fn secret_file(path: PathBuf) -> Result<PathBuf, String> {
    read_secret(&path).map(|_| path)
}

/// A node id: 1 to [`MAX_NODE_ID_BYTES`] of letters, digits, `-`, `_`, `.`,
/// so that it reads well in logs and metrics.
pub fn node_id(value: String) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if value.is_empty() || value.len() > MAX_NODE_ID_BYTES || !value.chars().all(allowed) {
        return Err(format!(
            "must be 1 to {MAX_NODE_ID_BYTES} letters, digits, '-', '_' or '.' (got \"{}\")",
            crate::excerpt(&value)
        ));
    }
    Ok(value)
}

/// A lease: a whole number of seconds (`"10s"`) or milliseconds
/// (`"2500ms"`), within [`CLUSTER_LEASE_RANGE`].
pub fn lease(value: String) -> Result<Duration, String> {
    let parse = |digits: &str, unit: fn(u64) -> Duration| digits.parse::<u64>().ok().map(unit);
    let parsed = match value.strip_suffix("ms") {
        Some(ms) => parse(ms, Duration::from_millis),
        None => value
            .strip_suffix('s')
            .and_then(|s| parse(s, Duration::from_secs)),
    };
    let range = CLUSTER_LEASE_RANGE;
    match parsed {
        Some(lease) if range.contains(&lease) => Ok(lease),
        Some(_) => Err(format!(
            "must be between {}s and {}s (got \"{}\")",
            range.start().as_secs(),
            range.end().as_secs(),
            crate::excerpt(&value)
        )),
        None => Err(format!(
            "must be a duration such as \"10s\" or \"2500ms\" (got \"{}\")",
            crate::excerpt(&value)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_seconds_or_milliseconds_within_range() {
        assert_eq!(lease("10s".into()), Ok(Duration::from_secs(10)));
        assert_eq!(lease("2500ms".into()), Ok(Duration::from_millis(2500)));
        assert_eq!(
            lease("999ms".into()),
            Err("must be between 1s and 600s (got \"999ms\")".into())
        );
        assert!(lease("601s".into()).is_err());
        for bad in ["10", "s", "ten s", "1.5s", "-2s", "10m"] {
            let err = lease(bad.into()).expect_err(bad);
            assert!(err.starts_with("must be a duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn node_ids_are_short_plain_names() {
        assert_eq!(node_id("node-1.eu_west".into()), Ok("node-1.eu_west".into()));
        for bad in [String::new(), "a b".into(), "née".into(), "x".repeat(65)] {
            assert!(node_id(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn with_tls_a_node_needs_a_ca_for_the_others_and_a_ca_file_needs_tls() {
        // PEM of the right kind is all the config checks; the TLS handshake judges the rest.
        let (dir, cert, key) = crate::tls::fake_pem_pair("cluster-ca");
        let parse = |text: String| crate::Config::parse(&text, "t.toml").map_err(|e| e.to_string());
        let tls = format!("[tls]\ncert-file = {cert:?}\nkey-file = {key:?}\n");
        let cluster = "[cluster]\nnode-id = \"n1\"\n";

        let no_ca = parse(format!("{tls}{cluster}")).unwrap_err();
        assert_eq!(no_ca, format!("t.toml:4:1: cluster.ca-file: {NEEDS_A_CA}"));
        let own = parse(format!("{tls}{cluster}ca-file = {cert:?}\n")).unwrap();
        assert_eq!(own.cluster.unwrap().ca_file, Some(cert.clone()));
        let client_ca = parse(format!("{tls}client-ca-file = {cert:?}\n{cluster}")).unwrap();
        assert_eq!(client_ca.cluster.unwrap().ca_file, None);

        let without_tls = parse(format!("{cluster}ca-file = {cert:?}\n")).unwrap_err();
        assert!(
            without_tls.starts_with("t.toml:3:11: cluster.ca-file: needs [tls]"),
            "{without_tls}"
        );
        let empty = parse(format!("{tls}{cluster}ca-file = {key:?}\n")).unwrap_err();
        assert!(
            empty.starts_with("t.toml:6:11: cluster.ca-file: ")
                && empty.ends_with("no PEM certificate in the file"),
            "{empty}"
        );

        let secret = dir.join("secret");
        std::fs::write(&secret, format!("{}\n", "s".repeat(MIN_SECRET_BYTES))).unwrap();
        let vouching = parse(format!(
            "{tls}{cluster}ca-file = {cert:?}\nsecret-file = {secret:?}\n"
        ))
        .unwrap();
        assert_eq!(vouching.cluster.unwrap().secret_file, Some(secret.clone()));
        let plaintext = parse(format!("{cluster}secret-file = {secret:?}\n")).unwrap_err();
        assert!(
            plaintext.starts_with("t.toml:3:15: cluster.secret-file: needs [tls]"),
            "{plaintext}"
        );
        std::fs::write(&secret, "short\n").unwrap();
        let short = parse(format!(
            "{tls}{cluster}ca-file = {cert:?}\nsecret-file = {secret:?}\n"
        ))
        .unwrap_err();
        assert!(
            short.starts_with("t.toml:7:15: cluster.secret-file: ") && short.contains("at least 32"),
            "{short}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
