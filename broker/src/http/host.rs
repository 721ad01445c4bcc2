//! The endpoint answers only requests that name it, against DNS rebinding: a web
//! page of another site, whose name its owner then points at 127.0.0.1, could
//! otherwise drive the loopback console from the browser of someone on this
//! machine. Such a request carries the page's name in its `Host` header, so every
//! route but the `/health/*` probes (kubelets probe by pod IP) answers only a
//! `Host` that is
//! - the address the endpoint is bound to, or `localhost`;
//! - bound to loopback: any loopback address, or a name under `localhost`
//!   (browsers resolve those to loopback themselves);
//! - bound to every interface: any IP address (a rebinding needs a name), or
//!   the machine's name;
//! - the host the other nodes of a cluster reach it by (`console/forward.rs`);
//! - one of `http-allowed-hosts`.
//!
//! Names compare without case, and the port is not compared: a rebinding
//! changes the name. Any other `Host` gets 421 Misdirected Request saying what to
//! add. A request without `Host` (no browser sends one) passes.
use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rebound_config::excerpt;

/// The hosts the endpoint answers to.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// The address it is bound to.
    bound: IpAddr,
    /// Lowercase names and addresses besides those `bound` implies.
    names: Vec<String>,
}

impl Hosts {
    /// The hosts of an endpoint bound to `bound`, reached by the other nodes of
    /// a cluster at `advertised` (`host:port`), with the operator's `allowed`
    /// (`http-allowed-hosts`, lowercase).
    pub fn new(bound: IpAddr, advertised: Option<&str>, allowed: &[String]) -> Hosts {
        let mut names = allowed.to_vec();
        names.extend(advertised.map(|a| normal(host_of(a))));
        if bound.is_unspecified() {
            names.extend(machine_name());
        }
        Hosts { bound, names }
    }

    /// Whether a request with `Host: host` (`name[:port]`) is for this endpoint.
    pub fn allow(&self, host: &str) -> bool {
        let name = normal(host_of(host));
        let known = || self.names.contains(&name);
        match name.parse::<IpAddr>() {
            Ok(ip) => {
                ip == self.bound
                    || self.bound.is_unspecified()
                    || (self.bound.is_loopback() && ip.is_loopback())
                    || known()
            }
            Err(_) => {
                name == "localhost" || (self.bound.is_loopback() && name.ends_with(".localhost")) || known()
            }
        }
    }
}

/// The middleware in front of every route but the probes.
pub async fn check(State(hosts): State<Arc<Hosts>>, request: Request, next: Next) -> Response {
    // An absolute request target names a host too; a header that is not text is no name.
    let named = request.uri().authority().map(|a| Some(a.as_str()));
    let headers = request.headers().get_all(header::HOST).iter();
    let refused = named
        .into_iter()
        .chain(headers.map(|value| value.to_str().ok()))
        .find(|host| !host.is_some_and(|host| hosts.allow(host)));
    match refused {
        None => next.run(request).await,
        Some(host) => (
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "this endpoint does not answer to the host {:?}: if that is how you reach it, \
                 add the name to `http-allowed-hosts` in the broker's config\n",
                excerpt(host.unwrap_or("(not text)"))
            ),
        )
            .into_response(),
    }
}

/// The host of `name[:port]` or `[v6]:port`.
fn host_of(authority: &str) -> &str {
    match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(ip, _)| ip),
        None => authority.split_once(':').map_or(authority, |(host, _)| host),
    }
}

/// A host as compared: lowercase, without the trailing dot of a fully qualified name.
fn normal(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// The machine's name, as the kernel has it.
fn machine_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(normal(name.trim())).filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(bound: &str, advertised: Option<&str>, allowed: &[&str]) -> Hosts {
        let allowed: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
        Hosts::new(bound.parse().unwrap(), advertised, &allowed)
    }

    #[test]
    fn on_loopback_only_its_own_names() {
        let local = hosts("127.0.0.1", None, &[]);
        for host in [
            "127.0.0.1:8161",
            "127.0.0.2",
            "[::1]:8161",
            "LocalHost:1",
            "a.localhost",
            "localhost.",
        ] {
            assert!(local.allow(host), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:8161",
            "10.0.0.5:8161",
            "localhost.attacker.example",
            "",
        ] {
            assert!(!local.allow(host), "{host}");
        }
    }

    #[test]
    fn configured_and_advertised_names_and_a_wide_listener_s_addresses() {
        let named = hosts("10.0.0.5", Some("node-1:8161"), &["console.example.com"]);
        for host in [
            "10.0.0.5:8161",
            "localhost",
            "Console.Example.com:443",
            "node-1:8161",
        ] {
            assert!(named.allow(host), "{host}");
        }
        for host in ["10.0.0.6", "127.0.0.1", "a.localhost", "attacker.example"] {
            assert!(!named.allow(host), "{host}");
        }
        let wide = hosts("0.0.0.0", Some("[fd00::1]:8161"), &[]);
        for host in ["10.0.0.7:8161", "[fd00::2]", "[FD00::1]:8161", "localhost"] {
            assert!(wide.allow(host), "{host}");
        }
        assert!(!wide.allow("attacker.example"));
        if let Some(name) = machine_name() {
            assert!(wide.allow(&format!("{name}:8161")));
        }
    }
}
