"""The web console at scale, in a real browser (headless Chromium): how long each
view takes to draw and how busy the page keeps the browser while it sits idle.

Started by tests/blackbox/console_browser.rs with a broker holding many queues,
one of them QUEUE (with messages) and a dead-letter queue:

    python3 console_scale.py URL QUEUE [--whole] [--render-ms N]

Each view marks `drawn:<view>` (a `performance` mark) when it has drawn fresh
data; a render time runs from the navigation (first render) or from the click
to that mark, and its browser share leaves out the time spent waiting for the
broker's answers (the page, its assets, the API). Idle CPU is Chromium's own count of main-thread task time
(`Performance.getMetrics`, TaskDuration) over IDLE_S seconds of a view left
alone, refreshes included. Prints the figures as one JSON line; exit 1 when
the browser share of a render or an idle CPU is over its bound, and, with
`--whole` (a release broker, as in BENCHMARKS.md), when a whole render is: a
debug broker answers a page of 10,000 queues ten times slower. The render bound
is RENDER_MS (the target, which bench/console-scale.sh checks) unless
`--render-ms` sets a looser one (the test suite's, on a machine busy with other
tests).
"""
import argparse
import json
import sys
import time

from console import walk

RENDER_MS = 300
IDLE_CPU = 0.05
IDLE_S = 10


def drawn_after(page, view, since):
    """Waits for the view's next `drawn` mark after `since` (ms); the time from
    `since` to it, whole and without the requests made in between."""
    page.wait_for_function(
        """([view, since]) => performance.getEntriesByName("drawn:" + view).some((m) => m.startTime > since)""",
        arg=[view, since],
        polling=10,
    )
    return page.evaluate(
        """([view, since]) => {
            const end = performance.getEntriesByName("drawn:" + view).at(-1).startTime;
            const calls = [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")]
              .filter((r) => r.startTime >= since && r.responseEnd <= end);
            // The time some request was waited for (requests may overlap).
            let waited = 0, reached = since;
            for (const r of calls.sort((a, b) => a.startTime - b.startTime)) {
              waited += Math.max(0, r.responseEnd - Math.max(r.startTime, reached));
              reached = Math.max(reached, r.responseEnd);
            }
            return [Math.round(end - since), Math.round(end - since - waited)];
        }""",
        [view, since],
    )


def timed(page, view, act):
    """From doing `act` to the view's next drawing: whole and browser share (ms)."""
    since = page.evaluate("performance.now()")
    act()
    return drawn_after(page, view, since)


def idle_cpu(page, cdp):
    """The share of IDLE_S seconds the page's main thread was busy."""
    def busy():
        metrics = cdp.send("Performance.getMetrics")["metrics"]
        return next(m["value"] for m in metrics if m["name"] == "TaskDuration")

    before, start = busy(), time.monotonic()
    time.sleep(IDLE_S)
    return round((busy() - before) / (time.monotonic() - start), 4)


def run(page, url, queue, whole, render_ms):
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    renders = {}

    # Logged in first: checking a password (argon2) is the login's cost, not a view's.
    page.goto(url + "/assets/favicon.svg")
    page.goto(url + "/#/queues")
    renders["queues_first_render"] = drawn_after(page, "queues", 0)
    renders["queues_sort"] = timed(page, "queues", lambda: page.click('button[data-sort="messages"]'))
    renders["queues_next_page"] = timed(page, "queues", lambda: page.click("#queues-next"))
    idle = {"queues": idle_cpu(page, cdp)}
    renders["queue_page"] = timed(page, "queue", lambda: page.goto(f"{url}/#/queue/{queue}"))
    renders["overview"] = timed(page, "overview", lambda: page.click("nav >> text=Overview"))
    idle["overview"] = idle_cpu(page, cdp)
    renders["dead_letters"] = timed(page, "dead-letters", lambda: page.click("nav >> text=Dead letters"))
    print(json.dumps({"render_ms": renders, "idle_cpu": idle}))

    slow = {k: v for k, v in renders.items() if (v[0] if whole else v[1]) > render_ms}
    busy = {k: v for k, v in idle.items() if v > IDLE_CPU}
    if slow or busy:
        share = "whole" if whole else "browser share of a"
        raise AssertionError(f"{share} render over {render_ms} ms: {slow}; busier than {IDLE_CPU:.0%} idle: {busy}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("queue")
    parser.add_argument("--whole", action="store_true")
    parser.add_argument("--render-ms", type=int, default=RENDER_MS)
    args = parser.parse_args()
    walk(run, args.url, args.queue, args.whole, args.render_ms)


if __name__ == "__main__":
    main()
