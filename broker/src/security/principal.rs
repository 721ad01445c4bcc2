//! [`Principal`]: the answer of authentication, the question of authorization.

/// Who is calling. The authentication layer puts one in every request's
/// extensions; services and the console read it from there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// No `[[users]]` are configured: security is off and every operation is allowed.
    Anonymous,
    /// A logged-in user, with its roles as the config in force gives them.
    User { name: String, roles: Vec<String> },
}
