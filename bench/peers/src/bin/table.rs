//! `table FILE...`: one Markdown table (workload × system) from `rebound perf --json` /
//! `peers --json` reports, one JSON object per file. Used by bench/compare.sh.
//!
//! Reports of the same workload, system and batch size (repeated runs) make one row,
//! each figure as min–max over them. A row says how many messages each client call
//! carried and how many were in flight, and what the system's acknowledgement means,
//! so that no row is read as like-for-like with another that it is not.
use serde_json::Value;

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn nested(v: &Value, outer: &str, k: &str) -> Option<f64> {
    v.get(outer).and_then(|o| o.get(k)).and_then(Value::as_f64)
}

/// min–max (or the one value) of what the runs have, formatted by `f`.
fn range(xs: &[Option<f64>], f: impl Fn(f64) -> String) -> String {
    let xs: Vec<f64> = xs.iter().flatten().copied().collect();
    let Some(lo) = xs.iter().copied().reduce(f64::min) else {
        return "–".into();
    };
    let hi = xs.iter().copied().fold(lo, f64::max);
    let (a, b) = (f(lo), f(hi));
    if a == b {
        a
    } else {
        format!("{a}–{b}")
    }
}

fn rate(x: f64) -> String {
    let r = x.round() as u64;
    // Thousands separators: these are read by people.
    let s = r.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// When a system acknowledges a send, as compare.sh runs it.
fn ack_means(system: &str) -> &'static str {
    match system {
        "rebound" => "fdatasync'd (group commit)",
        "rabbitmq" => "fdatasync'd (Raft WAL, batched)",
        "nats-sync-always" => "fsync'd (one per write)",
        "nats-default" | "nats" => "page cache, not fsync'd",
        "rebound-jms" => "fdatasync'd (group commit)",
        "artemis-jms" | "artemis-perf" => "journal synced (NIO, batched)",
        _ => "?",
    }
}

fn main() {
    let mut reports: Vec<Value> = vec![];
    for path in std::env::args().skip(1) {
        match std::fs::read_to_string(&path).map(|s| serde_json::from_str::<Value>(s.trim())) {
            Ok(Ok(v)) => reports.push(v),
            Ok(Err(e)) => eprintln!("table: {path}: not JSON: {e}"),
            Err(e) => eprintln!("table: {path}: {e}"),
        }
    }
    let order = ["durable", "fan", "poison", "backlog"];
    let sys_order = [
        "rebound",
        "rebound-jms",
        "artemis-jms",
        "artemis-perf",
        "rabbitmq",
        "nats-sync-always",
        "nats-default",
        "nats",
    ];
    let key = |v: &Value| {
        let w = v["workload"].as_str().unwrap_or("");
        let s = v["system"].as_str().unwrap_or("");
        (
            order.iter().position(|x| *x == w).unwrap_or(99),
            sys_order.iter().position(|x| *x == s).unwrap_or(99),
            num(v, "batch").unwrap_or(1.0) as u64,
            w.to_string(),
            s.to_string(),
        )
    };
    reports.sort_by_key(key);
    let mut groups: Vec<Vec<&Value>> = vec![];
    for v in &reports {
        match groups.last_mut() {
            Some(g) if key(g[0]) == key(v) => g.push(v),
            _ => groups.push(vec![v]),
        }
    }
    println!(
        "| workload | system | msgs per call / in flight | a send is acked when | runs | send msg/s | e2e msg/s | e2e p50 ms | p99 ms | p99.9 ms | send-ack p99 ms | broker CPU µs/msg | good done s | poison on DLQ s | drain msg/s | RSS growth B/msg | peak RSS MiB | peak disk B/msg | restart s |"
    );
    println!("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for g in &groups {
        let v = g[0];
        let all = |f: &dyn Fn(&Value) -> Option<f64>| g.iter().map(|v| f(v)).collect::<Vec<_>>();
        let ms = |x: f64| format!("{x:.2}");
        let system = v["system"].as_str().unwrap_or("?");
        let batch = num(v, "batch").unwrap_or(1.0);
        // A batched rebound row is not like-for-like with the peers' single publishes.
        let label = match system {
            "rebound" if batch > 1.0 => "rebound, batched".into(),
            "rebound-jms" => "rebound (JMS)".into(),
            // Artemis's heap is what `artemis create` gave it; compare.sh reports it.
            "artemis-jms" | "artemis-perf" => format!(
                "{}, heap {}",
                if system == "artemis-jms" {
                    "artemis (JMS)"
                } else {
                    "artemis perf client"
                },
                v["broker_heap"].as_str().unwrap_or("?")
            ),
            _ => system.to_string(),
        };
        // The broker's CPU over the whole client run, as compare.sh measured it, per message the
        // run sent (the JMS generator's warm-up included).
        let cpu = all(&|v| {
            let sent = num(v, "messages")? + num(v, "warmup_messages").unwrap_or(0.0);
            Some(num(v, "broker_process_cpu_s")? * 1e6 / sent)
        });
        println!(
            "| {} | {} | {} / {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            v["workload"].as_str().unwrap_or("?"),
            label,
            batch,
            num(v, "in_flight").unwrap_or(0.0),
            // rebound's client API: a Publish stream or unary Send calls.
            v["api"].as_str().map_or(String::new(), |api| format!(" ({api})")),
            ack_means(system),
            g.len(),
            range(&all(&|v| num(v, "send_rate")), rate),
            range(&all(&|v| num(v, "e2e_rate")), rate),
            range(&all(&|v| nested(v, "latency_ms", "p50")), ms),
            range(&all(&|v| nested(v, "latency_ms", "p99")), ms),
            range(&all(&|v| nested(v, "latency_ms", "p999")), ms),
            range(&all(&|v| nested(v, "send_latency_ms", "p99")), ms),
            range(&cpu, |x| format!("{x:.1}")),
            range(&all(&|v| num(v, "good_done_s")), ms),
            range(&all(&|v| num(v, "poison_dlq_s")), ms),
            range(&all(&|v| num(v, "drain_rate")), rate),
            range(&all(&|v| num(v, "bytes_per_message")), |x| format!("{x:.0}")),
            range(&all(&|v| num(v, "peak_rss_bytes")), |b| {
                format!("{:.0}", b / (1024.0 * 1024.0))
            }),
            // compare.sh's peak `du` of the data dir over the run, per message sent.
            range(&all(&|v| Some(num(v, "peak_disk_bytes")? / num(v, "messages")?)), |x| {
                format!("{x:.0}")
            }),
            // compare.sh's restart with the backlog queued: stop, start, until it accepts connections.
            range(&all(&|v| num(v, "restart_s")), ms),
        );
    }
}
