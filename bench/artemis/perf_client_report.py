#!/usr/bin/env python3
"""`artemis perf client --json` → one line in `rebound perf --json`'s schema, for bench/compare.sh.

usage: perf_client_report.py REPORT WORKLOAD PRODUCERS CONSUMERS SIZE IN_FLIGHT BROKER_PID

The perf client writes one sample per second ("interval", flagged "warmup" during --warmup) and a
"summary". Rates are over the samples after the warm-up: messages received (sent) in them divided
by the time they cover. Latencies are the summary's, which include the warm-up: transferTime (send
call → receipt, as e2e latency_ms) and sendTime (send call → completion, as send_latency_ms), in µs.
The broker's VmRSS and VmHWM come from /proc/BROKER_PID/status.
"""

import json
import sys


def latency(h):
    ms = lambda key: h[key] / 1000.0
    return {"p50": ms("50"), "p99": ms("99"), "p999": ms("99.9"), "max": ms("max")}


def rss(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(rest.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def main(path, workload, producers, consumers, size, in_flight, pid):
    with open(path) as f:
        samples = json.load(f)
    summary = next(s for s in samples if s["sampleType"] == "summary")
    if summary["result"] != "success":
        raise SystemExit(f"perf_client_report.py: the perf client reported {summary['result']}")
    intervals = [s for s in samples if s["sampleType"] == "interval"]
    measured = [s for s in intervals if not s["warmup"]]
    if not measured:
        raise SystemExit("perf_client_report.py: no sample after the warm-up (a longer --duration?)")
    # Each sample covers the time since the one before it.
    first = intervals.index(measured[0])
    start = intervals[first - 1]["time"] if first > 0 else measured[0]["time"] - 1000
    seconds = (measured[-1]["time"] - start) / 1000.0
    received = sum(s["received"] for s in measured)
    completed = sum(s["completed"] for s in measured)
    rss_now, peak = rss(pid)
    report = {
        "system": "artemis-perf",
        "workload": workload,
        "queue": None,
        "messages": summary["totalReceived"],
        "size": int(size),
        "producers": int(producers),
        "consumers": int(consumers),
        "in_flight": int(in_flight),
        "batch": 1,
        "duration_s": seconds,
        "send_rate": completed / seconds,
        "e2e_rate": received / seconds,
        "latency_ms": latency(summary["totalTransferTime"]),
        "send_latency_ms": latency(summary["totalSendTime"]),
        "store_commits": None,
        "store_syncs": None,
        "syncs_per_message": None,
        "rss_bytes": rss_now,
        "peak_rss_bytes": peak,
    }
    print(json.dumps(report, separators=(",", ":")))


if __name__ == "__main__":
    if len(sys.argv) != 8:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
