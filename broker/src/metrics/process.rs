//! The process's own figures, read from `/proc/self` at scrape time, under the
//! names every Prometheus client library uses (`process_*`), so existing
//! dashboards work. Where `/proc` is missing (not Linux) nothing is reported.
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The collector of the process's figures.
#[derive(Debug)]
pub(super) struct Process;

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stat = Stat::read();
        if let Some(stat) = &stat {
            let counter = ConstCounter::new(stat.cpu_seconds);
            let help = "User and system CPU time spent, in seconds.";
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                status_bytes("VmRSS").map(|b| b as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.as_ref().map(|s| s.virtual_bytes as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds.",
                stat.as_ref().and_then(|s| s.start_time_seconds),
            ),
            (
                "process_threads",
                "Threads of the process.",
                stat.as_ref().map(|s| s.threads as f64),
            ),
            (
                "process_open_fds",
                "Open file descriptors.",
                open_fds().map(|n| n as f64),
            ),
            (
                "process_max_fds",
                "Limit of open file descriptors.",
                max_fds().map(|n| n as f64),
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
            }
        }
        Ok(())
    }
}

/// What `/proc/self/stat` says of the process.
struct Stat {
    cpu_seconds: f64,
    threads: u64,
    virtual_bytes: u64,
    /// `None` when the boot time is unknown.
    start_time_seconds: Option<f64>,
}

impl Stat {
    fn read() -> Option<Stat> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name (field 2) may hold spaces; the fields after it cannot.
        let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
        // Field n of proc(5), counted from 1; `fields` starts at field 3 (state).
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        // SAFETY: sysconf only reads a system constant.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let ticks = (ticks > 0).then_some(ticks as f64)?;
        let started = field(22)? as f64 / ticks;
        Some(Stat {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            threads: field(20)?,
            virtual_bytes: field(23)?,
            start_time_seconds: boot_time().map(|boot| boot as f64 + started),
        })
    }
}

/// When the machine booted (`btime` of `/proc/stat`), in seconds since the
/// Unix epoch: a process's start time is counted from it.
fn boot_time() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// A size of `/proc/self/status` (`VmRSS`, `VmHWM`), in bytes.
pub(crate) fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// The CPU time (user + system) of this process so far, µs.
pub(crate) fn cpu_micros() -> Option<u64> {
    Stat::read().map(|stat| (stat.cpu_seconds * 1e6).round() as u64)
}

fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_fds() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_its_own_process() {
        let stat = super::Stat::read().expect("/proc/self/stat");
        assert!(stat.cpu_seconds >= 0.0);
        assert!(stat.threads >= 1 && stat.virtual_bytes > 1 << 20);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = stat.start_time_seconds.expect("a boot time");
        assert!(
            started <= now + 1.0 && started > now - 3600.0,
            "{started} vs {now}"
        );
        assert!(super::status_bytes("VmRSS").is_some_and(|b| b > 1 << 20));
        assert!(super::status_bytes("VmHWM") >= super::status_bytes("VmRSS"));
        assert!(super::cpu_micros().is_some());
        assert!(super::open_fds().is_some_and(|n| n >= 3));
        assert!(super::max_fds().is_some_and(|n| n >= 3));
    }
}
