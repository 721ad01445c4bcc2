//! `table FILE...`: one Markdown table (system × workload) from `rebound perf --json` /
//! `peers --json` reports, one JSON object per file. Used by bench/compare.sh.
use serde_json::Value;

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn rate(x: Option<f64>) -> String {
    x.map_or("–".into(), |r| format!("{:.0}", r))
}

fn secs(x: Option<f64>) -> String {
    x.map_or("–".into(), |s| format!("{s:.2}"))
}

fn mib(x: Option<f64>) -> String {
    x.map_or("–".into(), |b| format!("{:.0}", b / (1024.0 * 1024.0)))
}

fn main() {
    let mut rows: Vec<Value> = vec![];
    for path in std::env::args().skip(1) {
        match std::fs::read_to_string(&path).map(|s| serde_json::from_str::<Value>(s.trim())) {
            Ok(Ok(v)) => rows.push(v),
            Ok(Err(e)) => eprintln!("table: {path}: not JSON: {e}"),
            Err(e) => eprintln!("table: {path}: {e}"),
        }
    }
    let order = ["durable", "fan", "poison", "backlog"];
    let sys_order = ["rebound", "rabbitmq", "nats-sync-always", "nats-default", "nats"];
    let key = |v: &Value| {
        let w = v["workload"].as_str().unwrap_or("");
        let s = v["system"].as_str().unwrap_or("");
        (
            order.iter().position(|x| *x == w).unwrap_or(99),
            sys_order.iter().position(|x| *x == s).unwrap_or(99),
        )
    };
    rows.sort_by_key(key);
    println!(
        "| workload | system | send msg/s | e2e msg/s | e2e p50 ms | p99 ms | p99.9 ms | send-ack p50 ms | good done s | poison on DLQ s | drain msg/s | RSS growth MiB (B/msg) | peak RSS MiB |"
    );
    println!("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for v in &rows {
        let lat = |k: &str| {
            v["latency_ms"]
                .get(k)
                .and_then(Value::as_f64)
                .map_or("–".into(), |x| format!("{x:.2}"))
        };
        let send_p50 = v["send_latency_ms"]
            .get("p50")
            .and_then(Value::as_f64)
            .map_or("–".into(), |x| format!("{x:.2}"));
        let growth = match (num(v, "rss_growth_bytes"), num(v, "bytes_per_message")) {
            (Some(g), Some(per)) => format!("{} ({per:.0})", mib(Some(g))),
            _ => "–".into(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            v["workload"].as_str().unwrap_or("?"),
            v["system"].as_str().unwrap_or("?"),
            rate(num(v, "send_rate")),
            rate(num(v, "e2e_rate")),
            lat("p50"),
            lat("p99"),
            lat("p999"),
            send_p50,
            secs(num(v, "good_done_s")),
            secs(num(v, "poison_dlq_s")),
            rate(num(v, "drain_rate")),
            growth,
            mib(num(v, "peak_rss_bytes")),
        );
    }
}
