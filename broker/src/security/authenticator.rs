//! Who is calling: the check every call and stream goes through (see `layer.rs`),
//! against the `[[users]]` in force.
//!
//! A call logs in with HTTP basic credentials in its `authorization` metadata or,
//! without them, with the client certificate of its mutual TLS connection (subject
//! CN = user name). With no users configured everyone is
//! [`Principal::Anonymous`].
//!
//! A refusal says the same for an unknown user as for a wrong password, and
//! takes as long: an unknown user (or one who may log in only by certificate)
//! is checked against a decoy hash. argon2 checks run on the blocking pool, at
//! most [`MAX_CONCURRENT_CHECKS`] at once, so that guessing cannot take every
//! core; accepted credentials are cached (`cache.rs`) and failures slow their
//! peer down (`throttle.rs`). Each refusal is logged as a warning on the audit
//! target [`AUDIT_TARGET`], with the peer address.
//!
//! A caller forwarded by another node of the cluster, which vouches for it
//! with the cluster's secret, is admitted by name ([`Authenticator::admit_vouched`],
//! after `forwarded.rs` checked the secret).
//!
//! [`Authenticator::admit`] is the one entry both edges call (the gRPC layer,
//! `layer.rs`, and the HTTP endpoint's, `http/login.rs`): same users, cache,
//! slowdown and audit lines, whichever way a client comes in.
//!
//! The users' password hashes are swapped whole on a config reload
//! ([`Authenticator::install`]), applying to the next call. Roles are not kept
//! here: [`super::policy`] is their one table, read at every check.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use tokio::time::Instant;

use rebound_config::UserConfig;
use rustls::pki_types::CertificateDer;
use tokio::sync::Semaphore;
use tracing::warn;

use super::cache::{self, VerifiedCache};
use super::principal::Principal;
use super::throttle::Throttle;
use super::{AUDIT_TARGET, basic, certificate, password};

/// argon2 checks running at once, at most.
pub const MAX_CONCURRENT_CHECKS: usize = 2;

/// The answer to a call with wrong credentials, whatever was wrong.
pub const INVALID_CREDENTIALS: &str = "invalid user name or password";
/// The answer to a call without credentials when users are configured.
pub const CREDENTIALS_REQUIRED: &str =
    "authentication required: log in with a user name and password, or a client certificate";

/// What a call brought to log in with, taken from its HTTP request.
#[derive(Debug, Default)]
pub struct Credentials {
    /// The TCP peer.
    pub peer: Option<SocketAddr>,
    /// The `authorization` metadata, as sent.
    pub authorization: Option<http::HeaderValue>,
    /// The client certificate chain the TLS handshake verified (leaf first).
    pub certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

/// Why a call was refused; the message is what the client reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{CREDENTIALS_REQUIRED}")]
    NoCredentials,
    #[error("{INVALID_CREDENTIALS}")]
    Invalid,
}

/// Each user's password hash (none: certificate login only), by name.
type Users = HashMap<String, Option<String>>;

/// Authenticates calls against the users in force.
#[derive(Debug)]
pub struct Authenticator {
    users: RwLock<Arc<Users>>,
    verified: Mutex<VerifiedCache>,
    checks: Semaphore,
    throttle: Throttle,
}

impl Authenticator {
    pub fn new(users: &[UserConfig]) -> Authenticator {
        Authenticator {
            users: RwLock::new(table(users)),
            verified: Mutex::default(),
            checks: Semaphore::new(MAX_CONCURRENT_CHECKS),
            throttle: Throttle::default(),
        }
    }

    /// Puts a reloaded config's users in force, from the next call on.
    pub fn install(&self, users: &[UserConfig]) {
        *self.users.write().unwrap_or_else(|e| e.into_inner()) = table(users);
    }

    /// Whether no users are configured: every caller is anonymous.
    pub fn is_open(&self) -> bool {
        self.current().is_empty()
    }

    fn current(&self) -> Arc<Users> {
        self.users.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Authenticates `request` (its `authorization` header, else the client
    /// `certificates` of its connection, from `peer`) and puts the [`Principal`]
    /// in its extensions; or says why it may not call.
    pub async fn admit<B>(
        &self,
        request: &mut http::Request<B>,
        peer: Option<SocketAddr>,
        certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
    ) -> Result<(), Refused> {
        let principal = if self.is_open() {
            Principal::Anonymous
        } else {
            let credentials = Credentials {
                peer,
                authorization: request.headers().get(http::header::AUTHORIZATION).cloned(),
                certificates,
            };
            self.authenticate(credentials).await?
        };
        request.extensions_mut().insert(principal);
        Ok(())
    }

    /// Admits `request` as `user`, whom another node of the cluster vouched
    /// for (`forwarded.rs`): that user if it is one here, anonymous when no
    /// users are configured; refused (and audited) otherwise.
    pub fn admit_vouched<B>(
        &self,
        request: &mut http::Request<B>,
        user: String,
        peer: Option<SocketAddr>,
    ) -> Result<(), Refused> {
        let users = self.current();
        let principal = if users.is_empty() {
            Principal::Anonymous
        } else if users.contains_key(&user) {
            Principal::User { name: user }
        } else {
            audit_refusal(
                Some(&user),
                peer,
                "forwarded",
                &"a node vouched for a user unknown here",
            );
            return Err(Refused::Invalid);
        };
        request.extensions_mut().insert(principal);
        Ok(())
    }

    /// Who brings `caller`'s credentials, or why it may not call.
    pub async fn authenticate(&self, caller: Credentials) -> Result<Principal, Refused> {
        let users = self.current();
        if users.is_empty() {
            return Ok(Principal::Anonymous);
        }
        let outcome = match (&caller.authorization, &caller.certificates) {
            (Some(authorization), _) => self.password_login(&users, authorization, caller.peer).await,
            (None, Some(chain)) => match chain.first().and_then(|leaf| certificate::common_name(leaf)) {
                Some(name) if users.contains_key(&name) => Ok(name),
                name => Err((name, Refused::Invalid)),
            },
            (None, None) => Err((None, Refused::NoCredentials)),
        };
        match outcome {
            Ok(name) => Ok(Principal::User { name }),
            Err((name, refused)) => {
                let credentials = match (&caller.authorization, refused) {
                    (_, Refused::NoCredentials) => "none",
                    (Some(_), _) => "password",
                    (None, _) => "certificate",
                };
                audit_refusal(name.as_deref(), caller.peer, credentials, &refused);
                Err(refused)
            }
        }
    }

    /// Checks basic credentials: the user they name if right, else the name
    /// they gave (if any) and the refusal.
    async fn password_login(
        &self,
        users: &Users,
        authorization: &http::HeaderValue,
        peer: Option<SocketAddr>,
    ) -> Result<String, (Option<String>, Refused)> {
        let Some((name, password)) = basic::parse(authorization.as_bytes()) else {
            return Err((None, Refused::Invalid));
        };
        let hash = users.get(&name).and_then(Option::as_deref);
        let key = hash.map(|hash| cache::key(authorization.as_bytes(), hash));
        if key.is_some_and(|key| {
            self.verified
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&key)
        }) {
            return Ok(name);
        }
        if let Some(peer) = peer {
            let wait = self.throttle.admit(peer.ip(), Instant::now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        let right = {
            let _permit = self
                .checks
                .acquire()
                .await
                .expect("the semaphore is never closed");
            let hash = hash.unwrap_or(password::DECOY_HASH).to_owned();
            tokio::task::spawn_blocking(move || password::verify(&password, &hash))
                .await
                .unwrap_or(false)
        };
        match key {
            Some(key) if right => {
                self.verified
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key);
                Ok(name)
            }
            _ => {
                if let Some(peer) = peer {
                    self.throttle.failed(peer.ip(), Instant::now());
                }
                Err((Some(name), Refused::Invalid))
            }
        }
    }
}

fn table(users: &[UserConfig]) -> Arc<Users> {
    Arc::new(
        users
            .iter()
            .map(|user| (user.name.clone(), user.password_hash.clone()))
            .collect(),
    )
}

/// Writes a refused login to the audit log: who it claimed to be (if
/// anyone), from where, with what kind of credentials, and why.
pub(super) fn audit_refusal(
    user: Option<&str>,
    peer: Option<SocketAddr>,
    credentials: &'static str,
    why: &dyn std::fmt::Display,
) {
    warn!(
        target: AUDIT_TARGET,
        operation = "login",
        result = "denied",
        user = user.unwrap_or("-"),
        peer = %peer.map_or("-".to_owned(), |peer| peer.to_string()),
        credentials,
        "login refused: {why}"
    );
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use base64::Engine as _;

    use super::*;

    fn user(name: &str, password: Option<&str>, roles: &[&str]) -> UserConfig {
        UserConfig {
            name: name.into(),
            password_hash: password.map(password::hash),
            roles: roles.iter().map(|r| r.to_string()).collect(),
        }
    }

    fn basic(user: &str, password: &str) -> Credentials {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Credentials {
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            authorization: Some(format!("Basic {encoded}").parse().unwrap()),
            certificates: None,
        }
    }

    #[tokio::test]
    async fn without_users_everyone_is_anonymous() {
        let auth = Authenticator::new(&[]);
        assert!(auth.is_open());
        assert_eq!(
            auth.authenticate(Credentials::default()).await,
            Ok(Principal::Anonymous)
        );
        assert_eq!(auth.authenticate(basic("x", "y")).await, Ok(Principal::Anonymous));
    }

    #[tokio::test]
    async fn passwords_are_checked_and_refusals_alike() {
        let auth = Authenticator::new(&[user("alice", Some("pw"), &["ops"]), user("cert-only", None, &[])]);
        let alice = Principal::User { name: "alice".into() };
        assert_eq!(auth.authenticate(basic("alice", "pw")).await, Ok(alice));
        assert_eq!(
            auth.authenticate(Credentials::default()).await,
            Err(Refused::NoCredentials)
        );
        for (name, password) in [
            ("alice", "wrong"),
            ("bob", "pw"),
            ("cert-only", ""),
            ("alice", ""),
        ] {
            assert_eq!(
                auth.authenticate(basic(name, password)).await,
                Err(Refused::Invalid),
                "{name}"
            );
        }
        let mut garbage = basic("alice", "pw");
        garbage.authorization = Some("Basic %%%".parse().unwrap());
        assert_eq!(auth.authenticate(garbage).await, Err(Refused::Invalid));
    }

    #[tokio::test]
    async fn an_unknown_user_takes_as_long_as_a_wrong_password() {
        let auth = Authenticator::new(&[user("alice", Some("pw"), &[])]);
        let timed = |name: &'static str| {
            let mut caller = basic(name, "guess");
            caller.peer = None; // not slowed down: only the check itself is timed
            let auth = &auth;
            async move {
                let started = std::time::Instant::now();
                assert_eq!(auth.authenticate(caller).await, Err(Refused::Invalid));
                started.elapsed()
            }
        };
        let (mut wrong, mut unknown) = (Duration::MAX, Duration::MAX);
        for _ in 0..3 {
            wrong = wrong.min(timed("alice").await);
            unknown = unknown.min(timed("mallory").await);
        }
        // Both run argon2 (the unknown user against the decoy): without the decoy
        // the unknown user would be answered in microseconds.
        assert!(
            unknown * 4 >= wrong,
            "unknown user {unknown:?}, wrong password {wrong:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cached_credential_follows_reloads() {
        let auth = Authenticator::new(&[user("alice", Some("pw"), &["a"])]);
        assert!(auth.authenticate(basic("alice", "pw")).await.is_ok());
        // Failures slow the peer down, but not a credential already verified.
        for _ in 0..3 {
            assert!(auth.authenticate(basic("alice", "nope")).await.is_err());
        }
        let started = tokio::time::Instant::now();
        assert!(auth.authenticate(basic("alice", "pw")).await.is_ok());
        assert_eq!(started.elapsed(), Duration::ZERO);
        // A reload that keeps alice's hash keeps her logged in; a removed user is
        // refused at once.
        let hash = auth.current()["alice"].clone();
        auth.install(&[UserConfig {
            name: "alice".into(),
            password_hash: hash,
            roles: Vec::new(),
        }]);
        assert!(auth.authenticate(basic("alice", "pw")).await.is_ok());
        auth.install(&[user("carol", Some("x"), &[])]);
        assert!(!auth.is_open());
        assert_eq!(
            auth.authenticate(basic("alice", "pw")).await,
            Err(Refused::Invalid)
        );
    }

    #[tokio::test]
    async fn admit_puts_the_principal_in_the_request() {
        let request = |authorization: Option<&str>| {
            let mut builder = http::Request::builder();
            if let Some(value) = authorization {
                builder = builder.header(http::header::AUTHORIZATION, value);
            }
            builder.body(()).unwrap()
        };
        let open = Authenticator::new(&[]);
        let mut anonymous = request(None);
        assert_eq!(open.admit(&mut anonymous, None, None).await, Ok(()));
        assert_eq!(anonymous.extensions().get(), Some(&Principal::Anonymous));
        let auth = Authenticator::new(&[user("alice", Some("pw"), &[])]);
        let header = basic("alice", "pw").authorization.unwrap();
        let mut alice = request(Some(header.to_str().unwrap()));
        assert_eq!(auth.admit(&mut alice, None, None).await, Ok(()));
        assert_eq!(
            alice.extensions().get(),
            Some(&Principal::User { name: "alice".into() })
        );
        let mut nobody = request(None);
        assert_eq!(
            auth.admit(&mut nobody, None, None).await,
            Err(Refused::NoCredentials)
        );
        assert_eq!(nobody.extensions().get::<Principal>(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_from_a_peer_are_slowed_down() {
        let auth = Authenticator::new(&[user("alice", Some("pw"), &[])]);
        let started = tokio::time::Instant::now();
        for _ in 0..4 {
            assert!(auth.authenticate(basic("alice", "nope")).await.is_err());
        }
        // 100 + 200 + 400 ms of waiting before the 2nd, 3rd and 4th checks.
        assert!(
            started.elapsed() >= Duration::from_millis(700),
            "{:?}",
            started.elapsed()
        );
    }
}
