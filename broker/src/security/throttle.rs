//! Slowing down password guessing: each failed login from a peer IP doubles the
//! wait before that IP's next password check, from [`FIRST_DELAY`] up to
//! [`MAX_DELAY`]; an IP quiet for [`FORGET_AFTER`] starts afresh.
//!
//! A waiting check also pushes the IP's next slot one delay further, so that
//! guesses sent in parallel are spaced out like sequential ones. Only password
//! checks wait: a credential already verified (cached) is answered at once, so
//! a legitimate client sharing the IP of a guesser keeps working.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Wait after the first failure.
pub const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest wait.
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// An IP without a failure for this long is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(60);
/// Peers remembered at most; beyond, new peers are not slowed until old ones
/// are forgotten (the table must not grow without bound under a spray of IPs).
const MAX_PEERS: usize = 10_000;

#[derive(Debug)]
struct Peer {
    /// The wait the next failure starts from.
    delay: Duration,
    /// When the next check may run.
    next: Instant,
    last_failure: Instant,
}

/// Failed logins per peer IP.
#[derive(Debug, Default)]
pub struct Throttle {
    peers: Mutex<HashMap<IpAddr, Peer>>,
}

impl Throttle {
    /// How long a password check from `ip` must wait, starting `now`; reserves
    /// its slot.
    pub fn admit(&self, ip: IpAddr, now: Instant) -> Duration {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(peer) = peers.get_mut(&ip) else {
            return Duration::ZERO;
        };
        if now.duration_since(peer.last_failure) >= FORGET_AFTER {
            peers.remove(&ip);
            return Duration::ZERO;
        }
        let slot = peer.next.max(now);
        peer.next = slot + peer.delay;
        slot - now
    }

    /// Notes a failed login from `ip` at `now`: its wait doubles.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if peers.len() >= MAX_PEERS && !peers.contains_key(&ip) {
            peers.retain(|_, peer| now.duration_since(peer.last_failure) < FORGET_AFTER);
            if peers.len() >= MAX_PEERS {
                return;
            }
        }
        let peer = peers.entry(ip).or_insert(Peer {
            delay: FIRST_DELAY,
            next: now,
            last_failure: now,
        });
        let wait = if now.duration_since(peer.last_failure) >= FORGET_AFTER {
            FIRST_DELAY
        } else {
            peer.delay
        };
        peer.next = peer.next.max(now + wait);
        peer.delay = (wait * 2).min(MAX_DELAY);
        peer.last_failure = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn each_failure_doubles_the_wait_up_to_the_max() {
        let throttle = Throttle::default();
        let mut now = Instant::now();
        assert_eq!(throttle.admit(IP, now), Duration::ZERO);
        let mut waits = Vec::new();
        for _ in 0..8 {
            throttle.failed(IP, now);
            let wait = throttle.admit(IP, now);
            waits.push(wait.as_millis());
            now += wait;
        }
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(
            throttle.admit(OTHER, now),
            Duration::ZERO,
            "other peers are not slowed"
        );
    }

    #[test]
    fn parallel_guesses_are_spaced_out() {
        let throttle = Throttle::default();
        let now = Instant::now();
        throttle.failed(IP, now);
        let waits: Vec<_> = (0..3).map(|_| throttle.admit(IP, now).as_millis()).collect();
        assert_eq!(waits, [100, 300, 500]);
    }

    #[test]
    fn a_quiet_minute_forgets() {
        let throttle = Throttle::default();
        let now = Instant::now();
        for _ in 0..5 {
            throttle.failed(IP, now);
        }
        assert_eq!(throttle.admit(IP, now + FORGET_AFTER), Duration::ZERO);
        throttle.failed(IP, now + FORGET_AFTER);
        assert_eq!(throttle.admit(IP, now + FORGET_AFTER), ms(100));
    }
}
