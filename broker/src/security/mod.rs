//! Security: who is calling, and what they may do.
//!
//! Every gRPC call and stream is authenticated before any service sees it; the
//! outcome, a [`Principal`], travels in the request's extensions, where the
//! services (and the permission checks) read it. With no `[[users]]` in the
//! config every caller is [`Principal::Anonymous`] and may do everything.
//!
//! - [`principal`]: the [`Principal`] type.
//! - [`policy`]: the users' roles and security-settings in force ([`Security`]),
//!   swapped on reload.
//! - [`access`]: what each operation needs, and the check the services make.
//! - [`audit`]: the audit log (`rebound::audit`).
pub mod access;
pub mod audit;
pub mod policy;
pub mod principal;

pub use policy::Security;
pub use principal::Principal;
