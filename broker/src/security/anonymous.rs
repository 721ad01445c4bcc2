//! Safe defaults: without `[[users]]` nobody logs in and every client may do
//! everything, which the broker accepts only where few can reach it.
//!
//! On a loopback listen address that is allowed (with a warning at start); on
//! any other address the broker refuses to start, and a reload is refused,
//! unless the config says `allow-anonymous = true`. The rule holds for each
//! listener: gRPC's `listen` and the HTTP endpoint's `http-listen` (whose console
//! can retry, move and remove messages).
//!
//! A reload never turns the login off by accident: one that removes every user
//! from a broker whose calls log in is refused, on loopback too, unless it says
//! `allow-anonymous = true` ([`reload`]).

use std::net::SocketAddr;

use rebound_config::Config;

/// How calls are let in under a config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Users are configured: every call logs in.
    Login,
    /// No users, listening on loopback only.
    AnonymousLoopback,
    /// No users, on a wider address, and `allow-anonymous = true`.
    AnonymousAllowed,
}

/// A config without users for a listener others can reach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "listening on {listen} (`{key}`) without [[users]] would let anyone who can reach it read, purge and \
     delete every queue: add [[users]] (`rebound user hash-password` makes their password-hash), listen on a \
     loopback address, or set `allow-anonymous = true` to accept it"
)]
pub struct AnonymousRefused {
    /// The config key of the listener: `listen` or `http-listen`.
    pub key: &'static str,
    /// The listen address.
    pub listen: String,
}

/// Why a reload may not put a config in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadRefused {
    #[error(transparent)]
    Exposed(#[from] AnonymousRefused),
    #[error(
        "it removes every [[users]] entry, which would let every client do everything without \
         logging in: keep at least one user, or set `allow-anonymous = true` to turn the login off"
    )]
    LoginRemoved,
}

/// Whether a reload may put `config` in force on a broker serving `listeners`
/// (each listener's config key and bound address) whose calls log in now if `login`.
pub fn reload(
    config: &Config,
    login: bool,
    listeners: &[(&'static str, SocketAddr)],
) -> Result<(), ReloadRefused> {
    for &(key, address) in listeners {
        access(config, key, &address.to_string(), &[address])?;
    }
    if login && config.users.is_empty() && !config.allow_anonymous {
        return Err(ReloadRefused::LoginRemoved);
    }
    Ok(())
}

/// Whether `config` may serve the listener `key` on `addresses` (what `listen`
/// resolves to).
pub fn access(
    config: &Config,
    key: &'static str,
    listen: &str,
    addresses: &[SocketAddr],
) -> Result<Access, AnonymousRefused> {
    if !config.users.is_empty() {
        Ok(Access::Login)
    } else if !addresses.is_empty() && addresses.iter().all(|a| a.ip().is_loopback()) {
        Ok(Access::AnonymousLoopback)
    } else if config.allow_anonymous {
        Ok(Access::AnonymousAllowed)
    } else {
        Err(AnonymousRefused {
            key,
            listen: listen.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, "t.toml").unwrap()
    }

    #[test]
    fn anonymous_only_on_loopback_or_when_allowed() {
        let loopback: Vec<SocketAddr> = vec!["127.0.0.1:1".parse().unwrap(), "[::1]:1".parse().unwrap()];
        let wide: Vec<SocketAddr> = vec!["0.0.0.0:1".parse().unwrap()];
        let none = config("");
        assert_eq!(
            access(&none, "listen", "l", &loopback),
            Ok(Access::AnonymousLoopback)
        );
        let refused = access(&none, "http-listen", "0.0.0.0:1", &wide).unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("listening on 0.0.0.0:1 (`http-listen`) without [[users]]"),
            "{refused}"
        );
        assert!(access(&none, "listen", "x", &[]).is_err());
        let allowed = config("allow-anonymous = true");
        assert_eq!(
            access(&allowed, "listen", "w", &wide),
            Ok(Access::AnonymousAllowed)
        );
        let users = config("[[users]]\nname = \"a\"\n");
        assert_eq!(access(&users, "listen", "w", &wide), Ok(Access::Login));
    }

    #[test]
    fn a_reload_turns_the_login_off_only_when_it_says_so() {
        let loopback = [("listen", "127.0.0.1:1".parse().unwrap())];
        let none = config("");
        assert_eq!(reload(&none, true, &loopback), Err(ReloadRefused::LoginRemoved));
        assert_eq!(reload(&none, false, &loopback), Ok(()), "anonymous already");
        assert_eq!(reload(&config("allow-anonymous = true"), true, &loopback), Ok(()));
        let users = config("[[users]]\nname = \"a\"\n");
        assert_eq!(reload(&users, true, &loopback), Ok(()));
        let wide = [("http-listen", "0.0.0.0:1".parse().unwrap())];
        assert!(matches!(
            reload(&none, false, &wide),
            Err(ReloadRefused::Exposed(AnonymousRefused {
                key: "http-listen",
                ..
            }))
        ));
    }
}
