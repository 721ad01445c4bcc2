//! File handles: the broker's connections must run short before its store
//! does. A store that cannot open a file cannot write a run file or a journal
//! segment, while a refused connection only has to try again; so the
//! listeners' bounds stay within what the open-file limit leaves once
//! [`STORE_RESERVE`] handles are set aside.

/// Handles kept for everything but client connections: the store's files
/// (journal segments, run files, large bodies, sled's), PostgreSQL
/// connections, the config file, the listening sockets.
pub const STORE_RESERVE: u64 = 256;

/// Raises the soft open-file limit to the hard one, as servers do (a soft
/// limit of 1024 is common and far below what a broker needs), and returns
/// the limit in force.
pub fn raise_open_file_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if setrlimit(Resource::Nofile, limit).is_err() {
            limit = getrlimit(Resource::Nofile);
        }
    }
    limit.current.unwrap_or(u64::MAX)
}

/// How many connections the open-file limit leaves each listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handles {
    pub grpc: u64,
    pub http: u64,
}

impl Handles {
    /// The shares of an open-file limit of `nofile`: the HTTP endpoint (a few
    /// operators and scrapers) an eighth of what is left after the reserve,
    /// the clients the rest.
    pub fn within(nofile: u64) -> Handles {
        let left = nofile.saturating_sub(STORE_RESERVE);
        let http = (left / 8).max(1);
        Handles {
            grpc: left.saturating_sub(http).max(1),
            http,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_keeps_its_reserve_whatever_the_limit() {
        assert_eq!(Handles::within(1024), Handles { grpc: 672, http: 96 });
        let roomy = Handles::within(1 << 20);
        assert!(roomy.grpc > 900_000 && roomy.http > 100_000);
        // Below the reserve, one connection each rather than none.
        assert_eq!(Handles::within(100), Handles { grpc: 1, http: 1 });
        for nofile in [300, 1024, 4096, 65_536] {
            let shares = Handles::within(nofile);
            assert!(shares.grpc + shares.http + STORE_RESERVE <= nofile, "{nofile}");
        }
    }
}
