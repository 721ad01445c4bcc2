//! Security: who is calling, and what they may do.
//!
//! Every gRPC call and stream is authenticated before any service sees it
//! ([`layer`]), and so is every HTTP request but the health probes
//! (`http::login`), both through [`Authenticator::admit`]; the outcome, a
//! [`Principal`], travels in the request's extensions, where the services, the
//! console and the permission checks read it. With no
//! `[[users]]` in the config every caller is [`Principal::Anonymous`] and may do
//! everything, which [`anonymous`] allows only on loopback unless the config
//! says `allow-anonymous = true`.
//!
//! | file | what |
//! |---|---|
//! | `principal.rs` | the [`Principal`] type |
//! | `layer.rs` | the tower layer that authenticates every gRPC call |
//! | `authenticator.rs` | the check itself against the `[[users]]` in force (their password hashes), swapped on reload |
//! | `basic.rs` | HTTP basic credentials |
//! | `certificate.rs` | the CN of a client certificate |
//! | `forwarded.rs` | a caller another node of the cluster forwarded and vouches for |
//! | `password.rs` | argon2id hashing and verification |
//! | `cache.rs` | verified credentials |
//! | `throttle.rs` | slowing down repeated failures from one peer |
//! | `anonymous.rs` | the rule for running without users |
//! | `policy.rs` | the users' roles and security-settings in force ([`Security`]), swapped on reload |
//! | `operation.rs` | who asks and for what |
//! | `access.rs` | what each operation needs, and the check the services make |
//! | `audit.rs` | the audit log (`rebound::audit`) |
pub mod access;
pub mod anonymous;
pub mod audit;
pub mod authenticator;
pub mod basic;
pub mod cache;
pub mod certificate;
pub mod forwarded;
pub mod layer;
pub mod operation;
pub mod password;
pub mod policy;
pub mod principal;
pub mod throttle;

pub use authenticator::Authenticator;
pub use layer::AuthLayer;
pub use policy::Security;
pub use principal::Principal;

/// The tracing target of the audit log: failed logins, management operations and
/// denied operations, one event each (`RUST_LOG=rebound::audit=info` keeps just them).
pub const AUDIT_TARGET: &str = "rebound::audit";
