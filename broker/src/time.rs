//! Wall-clock time as the broker stores it: milliseconds since the Unix epoch.
//!
//! Due times of scheduled redeliveries and expirations are absolute wall-clock times
//! because they are stored and must still mean the same after a restart.
use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
