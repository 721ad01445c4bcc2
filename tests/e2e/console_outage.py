"""The console shows a queue in outage mode and lets an operator act on it, in a
real browser (headless Chromium).

Started by tests/blackbox/console_browser.rs with a broker whose queue QUEUE is in
outage mode (paused for long) and holds messages:

    python3 console_outage.py URL QUEUE

The overview counts and names the queue; the queues table, sorted by state, shows
it first as in outage; its page shows its messages as paused, sends a probe now,
then resumes delivery. The Rust test then checks the queue left outage mode.
"""
import sys

from playwright.sync_api import expect

from console import walk


def run(page, url, queue):
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    page.goto(url + "/")
    expect(page.locator(".card", has_text="In outage")).to_contain_text("1")
    expect(page.locator("#outages")).to_contain_text(queue)

    page.click("nav >> text=Queues")
    page.click('button[data-sort="state"]')
    first = page.locator("#queues tbody tr").first
    expect(first).to_have_attribute("data-queue", queue)
    expect(first.locator(".badge.outage")).to_have_text("outage")

    first.locator("a.queue-link").click()
    expect(page.locator("#messages .badge.paused").first).to_be_visible()
    expect(page.locator("#messages .badge.ready")).to_have_count(0)
    page.click("#probe-now")
    expect(page.locator("#toast")).to_have_text("Probe sent.")
    page.click("#resume")
    expect(page.locator("#toast")).to_have_text("Delivery resumed.")
    expect(page.locator("#resume")).to_have_count(0)

    if errors:
        raise AssertionError("the page reported errors: " + "; ".join(errors))


def main():
    url, queue = sys.argv[1:3]
    walk(run, url, queue)
    print("console outage e2e: ok")


if __name__ == "__main__":
    main()
