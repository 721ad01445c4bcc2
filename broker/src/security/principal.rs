//! [`Principal`]: the answer of authentication, the question of authorization.

/// Who is calling. The authentication layer puts one in every request's
/// extensions; services and the console read it from there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// No `[[users]]` are configured: security is off and every operation is allowed.
    Anonymous,
    /// A logged-in user. Its roles are the policy's to say (`policy.rs`), at
    /// every check, so that a reload applies at once.
    User { name: String },
}
