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
        if let Some(seconds) = cpu_seconds() {
            let counter = ConstCounter::new(seconds);
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
                rss_bytes(),
            ),
            ("process_open_fds", "Open file descriptors.", open_fds()),
            ("process_max_fds", "Limit of open file descriptors.", max_fds()),
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

/// utime + stime of `/proc/self/stat`, in seconds.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it cannot.
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split(' ');
    // After the name: state is field 3, utime 14, stime 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (utime + stime) as f64 / ticks as f64)
}

/// `VmRSS` of `/proc/self/status`.
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
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
        assert!(super::cpu_seconds().is_some_and(|s| s >= 0.0));
        assert!(super::rss_bytes().is_some_and(|b| b > 1 << 20));
        assert!(super::open_fds().is_some_and(|n| n >= 3));
        assert!(super::max_fds().is_some_and(|n| n >= 3));
    }
}
