//! The credentials argon2 has accepted, so that a client's every call does not
//! pay for a password check (argon2 is slow on purpose).
//!
//! A key is the SHA-256 of the `authorization` value *and* of the hash it was
//! verified against: a user whose hash changes or who is removed stops matching
//! at the next call, with nothing to invalidate. Neither passwords nor the
//! headers that carry them are kept. The cache is bounded; the oldest entries
//! go first.

use std::collections::{HashSet, VecDeque};

use sha2::{Digest, Sha256};

/// How many verified credentials are remembered.
pub const CAPACITY: usize = 4096;

/// A key of the cache.
pub type Key = [u8; 32];

/// Credentials verified so far, at most [`CAPACITY`].
#[derive(Debug, Default)]
pub struct VerifiedCache {
    keys: HashSet<Key>,
    order: VecDeque<Key>,
}

/// The key of an `authorization` value checked against `hash`.
pub fn key(authorization: &[u8], hash: &str) -> Key {
    let mut digest = Sha256::new();
    digest.update((authorization.len() as u64).to_be_bytes());
    digest.update(authorization);
    digest.update(hash.as_bytes());
    digest.finalize().into()
}

impl VerifiedCache {
    pub fn contains(&self, key: &Key) -> bool {
        self.keys.contains(key)
    }

    pub fn insert(&mut self, key: Key) {
        if !self.keys.insert(key) {
            return;
        }
        self.order.push_back(key);
        if self.order.len() > CAPACITY
            && let Some(oldest) = self.order.pop_front()
        {
            self.keys.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_depend_on_header_and_hash() {
        assert_eq!(key(b"Basic x", "h1"), key(b"Basic x", "h1"));
        assert_ne!(key(b"Basic x", "h1"), key(b"Basic x", "h2"));
        assert_ne!(key(b"Basic x", "h1"), key(b"Basic y", "h1"));
        assert_ne!(key(b"ab", "c"), key(b"a", "bc"));
    }

    #[test]
    fn bounded_oldest_out() {
        let mut cache = VerifiedCache::default();
        let k = |i: usize| key(i.to_string().as_bytes(), "h");
        for i in 0..=CAPACITY {
            cache.insert(k(i));
            cache.insert(k(i));
        }
        assert_eq!(cache.keys.len(), CAPACITY);
        assert!(!cache.contains(&k(0)));
        assert!(cache.contains(&k(1)) && cache.contains(&k(CAPACITY)));
    }
}
