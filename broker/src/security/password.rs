//! Passwords: argon2id hashing (`rebound user hash-password`) and verification,
//! the one place that calls argon2.
//!
//! argon2 is slow on purpose (tens of ms and ~19 MiB per check with the default
//! parameters), so callers run [`verify`] on the blocking pool and cache what it
//! accepted (see `authenticator.rs`).

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// A hash of no one's password, with argon2's default parameters, checked
/// instead when the user named does not exist or has no password, so that a
/// failed login takes as long whether the user exists or not.
pub const DECOY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$8PJSt3X9ATCokCZPd4Dj0g$BGu35/h2UsSUBMau+yRvFSSHx8mRqCDpBF7u7THoQ6g";

/// The argon2id PHC string of `password`, with argon2's default parameters and
/// a random salt.
pub fn hash(password: &str) -> String {
    Argon2::default()
        .hash_password(password.as_bytes(), &SaltString::generate(&mut OsRng))
        .expect("argon2 with its default parameters hashes any password")
        .to_string()
}

/// Whether `password` is the one `hash` (a PHC string, checked when the config
/// loaded) was made from. Slow: call it on the blocking pool.
pub fn verify(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_their_password_only() {
        let hashed = hash("s3cret");
        assert!(hashed.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{hashed}");
        assert!(verify("s3cret", &hashed));
        assert!(!verify("s3cret ", &hashed));
        assert_ne!(hash("s3cret"), hashed, "salted");
        assert!(!verify("", DECOY_HASH));
        assert!(PasswordHash::new(DECOY_HASH).is_ok());
    }
}
