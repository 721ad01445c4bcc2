//! How much memory the broker may use, for the default `global-max-size`: half of
//! it, as Artemis takes half of its heap. That is the machine's memory, or the
//! memory limit of the broker's cgroup (a container's) when it is lower.
use rebound_config::GlobalMaxSize;

/// The bytes `global-max-size` stands for; `None` = unlimited (also when the
/// memory cannot be read; the broker logs the value in force at start).
pub fn global_max_size(setting: GlobalMaxSize) -> Option<u64> {
    match setting {
        GlobalMaxSize::Auto => usable_memory().map(|bytes| bytes / 2),
        GlobalMaxSize::Unlimited => None,
        GlobalMaxSize::Bytes(bytes) => Some(bytes),
    }
}

/// The machine's memory, bounded by a cgroup limit if one is set.
pub fn usable_memory() -> Option<u64> {
    let machine = read("/proc/meminfo").and_then(|text| mem_total(&text));
    let cgroup = cgroup_limit();
    match (machine, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// The memory limit of this process's cgroup: v2 (`memory.max` of the path in
/// `/proc/self/cgroup`, or of the root of a container's namespace), else v1
/// (`memory.limit_in_bytes`).
fn cgroup_limit() -> Option<u64> {
    let own = read("/proc/self/cgroup")
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
        })
        .unwrap_or_default();
    [
        format!("/sys/fs/cgroup{}/memory.max", own.trim_end_matches('/')),
        "/sys/fs/cgroup/memory.max".to_owned(),
        "/sys/fs/cgroup/memory/memory.limit_in_bytes".to_owned(),
    ]
    .iter()
    .find_map(|path| read(path).and_then(|text| limit(&text)))
}

/// A cgroup limit file's value; `max` (v2) and v1's "no limit" (a page-rounded
/// `i64::MAX`) are none.
fn limit(text: &str) -> Option<u64> {
    let bytes: u64 = text.trim().parse().ok()?;
    (bytes < 1 << 62).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_meminfo_and_cgroup_limits() {
        assert_eq!(mem_total("MemFree: 1 kB\nMemTotal:  2048 kB\n"), Some(2 << 20));
        assert_eq!(limit("max\n"), None);
        assert_eq!(limit("9223372036854771712\n"), None);
        assert_eq!(limit("536870912\n"), Some(512 << 20));
        assert!(usable_memory().is_some_and(|m| m > 1 << 20));
        assert_eq!(global_max_size(GlobalMaxSize::Unlimited), None);
        assert_eq!(global_max_size(GlobalMaxSize::Bytes(7)), Some(7));
        assert_eq!(
            global_max_size(GlobalMaxSize::Auto),
            usable_memory().map(|m| m / 2)
        );
    }
}
