//! The open connections of one listener, and who gives way when it is full.
//!
//! A connection is *proven* once it has made a call (gRPC: one that passed
//! the login; HTTP: any request). At a bound (all the listener may hold, or
//! one IP address's share) a newcomer takes the place of the oldest
//! connection that is not proven and has no call under way; only when there
//! is none is the newcomer refused. So a flood of connections that never
//! speak, or never log in, churns among itself while the clients that work
//! keep their connections and new ones still get in.
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use tokio_util::sync::CancellationToken;

/// One open connection, as the registry and its calls see it.
#[derive(Debug)]
pub struct Conn {
    /// Its place in accept order: the lowest is the oldest.
    id: u64,
    peer: SocketAddr,
    /// Milliseconds after the registry's epoch it was accepted.
    opened_ms: u64,
    /// It has opened its protocol (see [`super::Guarded`]).
    greeted: AtomicBool,
    proven: AtomicBool,
    calls: AtomicU32,
    /// Milliseconds after the epoch its last call ended (or it was accepted).
    idle_since_ms: AtomicU64,
    /// Fired when the broker closes it.
    close: CancellationToken,
    /// The registry's epoch, which the times above count from.
    epoch: Instant,
}

impl Conn {
    /// Counts a call on this connection while the returned guard lives;
    /// `proves` marks the connection as one that does not give way.
    pub fn call(self: &Arc<Self>, proves: bool) -> Call {
        if proves {
            self.proven.store(true, Ordering::Relaxed);
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        Call { conn: self.clone() }
    }

    pub fn greeted(&self) {
        self.greeted.store(true, Ordering::Relaxed);
    }

    /// Fires when the broker closes the connection.
    pub fn closing(&self) -> &CancellationToken {
        &self.close
    }

    fn evictable(&self) -> bool {
        !self.proven.load(Ordering::Relaxed) && self.calls.load(Ordering::Relaxed) == 0
    }
}

/// Why a connection was closed by the broker rather than its peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Closed {
    /// A newcomer took its place at a bound.
    Evicted,
    /// It did not open its protocol within `handshake-timeout-ms`.
    Handshake,
    /// No call for `idle-connection-timeout-ms`.
    Idle,
}

impl Closed {
    pub fn label(self) -> &'static str {
        match self {
            Closed::Evicted => "evicted",
            Closed::Handshake => "handshake",
            Closed::Idle => "idle",
        }
    }
}

/// Which bound refused a newcomer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// Every connection the listener may hold is open and proven or busy.
    Listener(u64),
    /// The peer's address has its whole share open, proven or busy.
    Address(u64),
}

/// The bounds an admission is checked against (read from the limits at each
/// accept, so that a reload applies).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub total: u64,
    pub per_ip: u64,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    by_id: BTreeMap<u64, Arc<Conn>>,
    by_peer: HashMap<SocketAddr, Arc<Conn>>,
    per_ip: HashMap<IpAddr, u64>,
}

impl Open {
    fn remove(&mut self, conn: &Conn) -> bool {
        if self.by_id.remove(&conn.id).is_none() {
            return false;
        }
        self.by_peer.remove(&conn.peer);
        let ip = conn.peer.ip();
        if let Some(count) = self.per_ip.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&ip);
            }
        }
        true
    }

    /// The oldest connection that may give way, among those of `ip` if given.
    fn oldest_evictable(&self, ip: Option<IpAddr>) -> Option<Arc<Conn>> {
        self.by_id
            .values()
            .find(|c| ip.is_none_or(|ip| c.peer.ip() == ip) && c.evictable())
            .cloned()
    }
}

/// The open connections of one listener; the gauge shows how many.
pub struct Registry {
    open: Mutex<Open>,
    epoch: Instant,
    gauge: Gauge,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    pub fn new(gauge: Gauge) -> Registry {
        Registry {
            open: Mutex::default(),
            epoch: Instant::now(),
            gauge,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        // Every update leaves the maps consistent, so a poisoned lock is too.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Registers a connection from `peer`, making room within `bounds` by
    /// closing the connections that give way (returned, for the count).
    pub fn admit(self: &Arc<Self>, peer: SocketAddr, bounds: Bounds) -> Result<Admitted, Full> {
        let mut open = self.lock();
        let ip = peer.ip();
        let mut evicted = Vec::new();
        // Per address first: its own newcomer pushes out one of its own.
        if open.per_ip.get(&ip).copied().unwrap_or(0) >= bounds.per_ip {
            let victim = open
                .oldest_evictable(Some(ip))
                .ok_or(Full::Address(bounds.per_ip))?;
            open.remove(&victim);
            evicted.push(victim);
        }
        if open.by_id.len() as u64 >= bounds.total {
            let Some(victim) = open.oldest_evictable(None) else {
                // Nobody gave way after all: put back the one that did.
                for conn in evicted {
                    insert(&mut open, conn);
                }
                return Err(Full::Listener(bounds.total));
            };
            open.remove(&victim);
            evicted.push(victim);
        }
        let now = self.now_ms();
        let conn = Arc::new(Conn {
            id: open.next_id,
            peer,
            opened_ms: now,
            greeted: AtomicBool::new(false),
            proven: AtomicBool::new(false),
            calls: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(now),
            close: CancellationToken::new(),
            epoch: self.epoch,
        });
        open.next_id += 1;
        insert(&mut open, conn.clone());
        self.gauge.set(open.by_id.len() as i64);
        drop(open);
        for victim in &evicted {
            victim.close.cancel();
        }
        Ok(Admitted {
            registration: Registration {
                conn,
                registry: self.clone(),
            },
            evicted: evicted.len(),
        })
    }

    /// Closes the connections past their deadlines; how many, and why.
    pub fn sweep(&self, handshake: Duration, idle: Duration) -> Vec<Closed> {
        let now = self.now_ms();
        let handshake = handshake.as_millis() as u64;
        let idle = idle.as_millis() as u64;
        let mut open = self.lock();
        let overdue: Vec<(Arc<Conn>, Closed)> = open
            .by_id
            .values()
            .filter_map(|conn| {
                if !conn.greeted.load(Ordering::Relaxed) {
                    (now.saturating_sub(conn.opened_ms) >= handshake).then_some(Closed::Handshake)
                } else {
                    let since = conn.idle_since_ms.load(Ordering::Relaxed);
                    (conn.calls.load(Ordering::Relaxed) == 0 && now.saturating_sub(since) >= idle)
                        .then_some(Closed::Idle)
                }
                .map(|why| (conn.clone(), why))
            })
            .collect();
        for (conn, _) in &overdue {
            open.remove(conn);
        }
        self.gauge.set(open.by_id.len() as i64);
        drop(open);
        overdue
            .into_iter()
            .map(|(conn, why)| {
                conn.close.cancel();
                why
            })
            .collect()
    }

    /// [`Conn::call`] on `peer`'s connection; `None` when it is not (or no
    /// longer) registered.
    pub fn call(&self, peer: SocketAddr, proves: bool) -> Option<Call> {
        Some(self.lock().by_peer.get(&peer)?.call(proves))
    }

    fn release(&self, conn: &Conn) {
        let mut open = self.lock();
        if open.remove(conn) {
            self.gauge.set(open.by_id.len() as i64);
        }
    }
}

fn insert(open: &mut Open, conn: Arc<Conn>) {
    *open.per_ip.entry(conn.peer.ip()).or_default() += 1;
    open.by_peer.insert(conn.peer, conn.clone());
    open.by_id.insert(conn.id, conn);
}

/// A connection admitted, and how many gave way to it.
#[derive(Debug)]
pub struct Admitted {
    pub registration: Registration,
    pub evicted: usize,
}

/// A connection's place in the registry, given up when this is dropped.
#[derive(Debug)]
pub struct Registration {
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl Registration {
    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.release(&self.conn);
    }
}

/// A call under way on a connection: while it lives, the connection is busy.
#[derive(Debug)]
pub struct Call {
    conn: Arc<Conn>,
}

impl Drop for Call {
    fn drop(&mut self) {
        let conn = &self.conn;
        conn.idle_since_ms
            .store(conn.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        conn.calls.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(ip: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((ip, port))
    }

    const ROOMY: Bounds = Bounds {
        total: 100,
        per_ip: 100,
    };

    #[test]
    fn a_newcomer_takes_the_place_of_the_oldest_that_never_called() {
        let registry = Arc::new(Registry::new(Gauge::default()));
        let bounds = Bounds { total: 3, ..ROOMY };
        let first = registry.admit(peer([127, 0, 0, 1], 1), bounds).unwrap();
        let second = registry.admit(peer([127, 0, 0, 1], 2), bounds).unwrap();
        let _call = registry.call(peer([127, 0, 0, 1], 1), true).unwrap();
        let _third = registry.admit(peer([127, 0, 0, 1], 3), bounds).unwrap();
        let fourth = registry.admit(peer([127, 0, 0, 2], 4), bounds).unwrap();
        assert_eq!(fourth.evicted, 1);
        assert!(!first.registration.conn.close.is_cancelled(), "it called");
        assert!(
            second.registration.conn.close.is_cancelled(),
            "the oldest that never called"
        );
        assert_eq!(registry.gauge.get(), 3);
    }

    #[test]
    fn a_full_listener_of_proven_or_busy_connections_refuses_the_newcomer() {
        let registry = Arc::new(Registry::new(Gauge::default()));
        let bounds = Bounds { total: 2, ..ROOMY };
        let _a = registry.admit(peer([10, 0, 0, 1], 1), bounds).unwrap();
        let _b = registry.admit(peer([10, 0, 0, 2], 1), bounds).unwrap();
        let _proven = registry.call(peer([10, 0, 0, 1], 1), true).unwrap();
        // A call under way that does not prove (a health probe) still holds its place.
        let _busy = registry.call(peer([10, 0, 0, 2], 1), false).unwrap();
        assert_eq!(
            registry.admit(peer([10, 0, 0, 3], 1), bounds).unwrap_err(),
            Full::Listener(2)
        );
        assert_eq!(registry.gauge.get(), 2);
    }

    #[test]
    fn an_address_at_its_share_pushes_out_only_its_own() {
        let registry = Arc::new(Registry::new(Gauge::default()));
        let bounds = Bounds { total: 10, per_ip: 1 };
        let other = registry.admit(peer([10, 0, 0, 9], 1), bounds).unwrap();
        let old = registry.admit(peer([10, 0, 0, 1], 1), bounds).unwrap();
        let _new = registry.admit(peer([10, 0, 0, 1], 2), bounds).unwrap();
        assert!(old.registration.conn.close.is_cancelled());
        assert!(!other.registration.conn.close.is_cancelled());
        let _proven = registry.call(peer([10, 0, 0, 1], 2), true).unwrap();
        assert_eq!(
            registry.admit(peer([10, 0, 0, 1], 3), bounds).unwrap_err(),
            Full::Address(1)
        );
    }

    #[test]
    fn a_refusal_at_the_listener_bound_puts_back_the_one_its_address_gave_up() {
        let registry = Arc::new(Registry::new(Gauge::default()));
        let mine = registry.admit(peer([10, 0, 0, 1], 1), ROOMY).unwrap();
        let theirs = registry.admit(peer([10, 0, 0, 2], 1), ROOMY).unwrap();
        let _proven = registry.call(peer([10, 0, 0, 2], 1), true).unwrap();
        // Bounds lowered (a reload) below what is open: mine gives way to my
        // newcomer, but the listener is still full of a proven connection, so
        // nobody leaves and the newcomer is refused.
        let bounds = Bounds { total: 1, per_ip: 1 };
        assert_eq!(
            registry.admit(peer([10, 0, 0, 1], 2), bounds).unwrap_err(),
            Full::Listener(1)
        );
        assert!(!mine.registration.conn.close.is_cancelled());
        assert!(!theirs.registration.conn.close.is_cancelled());
        assert_eq!(registry.gauge.get(), 2);
        drop(mine);
        assert_eq!(registry.gauge.get(), 1, "put back whole: it leaves once");
    }

    #[test]
    fn the_sweep_closes_the_silent_and_the_idle_but_not_a_call_under_way() {
        let registry = Arc::new(Registry::new(Gauge::default()));
        let silent = registry.admit(peer([10, 0, 0, 1], 1), ROOMY).unwrap();
        let idle = registry.admit(peer([10, 0, 0, 1], 2), ROOMY).unwrap();
        let busy = registry.admit(peer([10, 0, 0, 1], 3), ROOMY).unwrap();
        idle.registration.conn.greeted();
        busy.registration.conn.greeted();
        let _call = registry.call(peer([10, 0, 0, 1], 3), true).unwrap();
        assert!(
            registry
                .sweep(Duration::from_secs(60), Duration::from_secs(60))
                .is_empty()
        );
        let mut closed = registry.sweep(Duration::ZERO, Duration::ZERO);
        closed.sort_by_key(|c| c.label());
        assert_eq!(closed, [Closed::Handshake, Closed::Idle]);
        assert!(silent.registration.conn.close.is_cancelled());
        assert!(idle.registration.conn.close.is_cancelled());
        assert!(!busy.registration.conn.close.is_cancelled());
        assert_eq!(registry.gauge.get(), 1);
    }

    #[test]
    fn a_dropped_registration_frees_its_place_once() {
        let registry = Arc::new(Registry::new(Gauge::default()));
        let bounds = Bounds { total: 1, per_ip: 1 };
        let first = registry.admit(peer([10, 0, 0, 1], 1), bounds).unwrap();
        // Evicted: its place is already taken; dropping it later frees nothing more.
        let second = registry.admit(peer([10, 0, 0, 1], 2), bounds).unwrap();
        drop(first);
        assert_eq!(registry.gauge.get(), 1);
        drop(second);
        assert_eq!(registry.gauge.get(), 0);
        assert!(registry.call(peer([10, 0, 0, 1], 2), true).is_none());
    }
}
