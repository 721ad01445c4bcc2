//! How the nodes of a cluster reach each other: where this node's HTTP endpoint
//! is advertised to the others, and the client a node calls the others with.
use std::sync::Arc;

use rebound_config::{ClusterConfig, Config};

use crate::grpc::Nodes;
use crate::security::forwarded::NodeSecret;

/// Where the other nodes of a cluster reach this node's HTTP endpoint
/// (`http`), for their consoles: where it listens, or, when it listens on
/// every interface, the host of the gRPC address it `advertise`s. `None`
/// when it listens on a loopback address and the nodes reach each other on
/// another: they could not reach it.
pub(super) fn http_advertise(http: std::net::SocketAddr, advertise: &str) -> Option<String> {
    let host = advertise.rsplit_once(':').map_or(advertise, |(host, _)| host);
    let loopback_host = host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match http.ip() {
        ip if ip.is_unspecified() => Some(format!("{host}:{}", http.port())),
        ip if ip.is_loopback() && !loopback_host => None,
        _ => Some(http.to_string()),
    }
}

/// How a node reaches the other nodes (`grpc/cluster/nodes.rs`): over TLS when it
/// serves TLS, trusting `[cluster] ca-file` or else `[tls] client-ca-file`;
/// plaintext otherwise, and for a single broker (which forwards nothing).
/// With the cluster's `secret`, it vouches for callers who logged in with a
/// certificate (`security/forwarded.rs`; the config allows one only with TLS).
/// A node gives up on another that stops answering within about its lease.
pub(super) fn nodes(
    config: &Config,
    cluster: Option<&ClusterConfig>,
    secret: Option<Arc<NodeSecret>>,
) -> anyhow::Result<Nodes> {
    let nodes = tls_nodes(config, cluster, secret)?;
    Ok(match cluster {
        Some(cluster) => nodes.within_lease(cluster.lease),
        None => nodes,
    })
}

fn tls_nodes(
    config: &Config,
    cluster: Option<&ClusterConfig>,
    secret: Option<Arc<NodeSecret>>,
) -> anyhow::Result<Nodes> {
    let (Some(tls), Some(cluster)) = (&config.tls, cluster) else {
        return Ok(Nodes::default());
    };
    let (ca_file, ca_key) = match (&cluster.ca_file, &tls.client_ca_file) {
        (Some(ca), _) => (ca.clone(), "cluster.ca-file"),
        (None, Some(ca)) => (ca.clone(), "tls.client-ca-file"),
        // A [cluster] table without either is a config error; --node-id alone gets here.
        (None, None) => anyhow::bail!("{}", rebound_config::NEEDS_A_CA),
    };
    let nodes = Nodes::tls(ca_file, ca_key, tls.cert_file.clone(), tls.key_file.clone())
        .map_err(anyhow::Error::msg)?;
    Ok(match secret {
        Some(secret) => nodes.with_secret(secret),
        None => nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::http_advertise;

    #[test]
    fn the_http_endpoint_is_advertised_where_the_other_nodes_reach_it() {
        let at = |http: &str, advertise| http_advertise(http.parse().unwrap(), advertise);
        assert_eq!(at("0.0.0.0:8161", "node-1:61616").as_deref(), Some("node-1:8161"));
        assert_eq!(
            at("[::]:8161", "[fd00::1]:61616").as_deref(),
            Some("[fd00::1]:8161")
        );
        assert_eq!(
            at("10.0.0.5:8161", "node-1:61616").as_deref(),
            Some("10.0.0.5:8161")
        );
        assert_eq!(
            at("127.0.0.1:8161", "127.0.0.2:61616").as_deref(),
            Some("127.0.0.1:8161")
        );
        assert_eq!(
            at("127.0.0.1:8161", "node-1:61616"),
            None,
            "not reachable from node-2"
        );
    }
}
