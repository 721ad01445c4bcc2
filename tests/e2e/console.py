"""End-to-end test of the web console in a real browser (headless Chromium).

Started by tests/blackbox/console_browser.rs with a broker whose queue QUEUE holds a
message and whose dead-letter queue DLQ holds the poisoned messages of QUEUE:

    python3 console.py URL QUEUE DLQ BODY REASON [SCREENSHOT.png]

It walks the console as an operator would: finds the queue in the table, browses a
message, goes through the queue REPORTS by position and message id, opens the dead letters of the queue (where the test's gateway timeouts,
each with its own timing and request id, make one group), previews a retry and
confirms it.
The Rust test then checks over gRPC that the messages are back on QUEUE. Exit 0 on
success; on failure it prints why (and leaves a screenshot next to the test's
temporary directory when asked to).
"""
import os
import re
import sys
import tempfile
from datetime import datetime

from playwright.sync_api import expect, sync_playwright

CHROMIUM = os.environ.get("REBOUND_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000
# A queue of the test's: a JSON body of 1,000 numbers, then a message scheduled for later.
REPORTS = "reports"
# The group of the test's "gateway timeout after <ms> ms (request id <hex>)" dead letters.
GATEWAY_MASKED = "gateway timeout after <n> ms (request id <id>)"


def run(page, url, queue, dlq, body, reason, screenshot):
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    # Overview, then the queues table, filtered down to the queue.
    page.goto(url + "/")
    expect(page.locator("h1")).to_have_text("Overview")
    page.click("nav >> text=Queues")
    page.fill("#queue-filter", queue)
    row = page.locator(f'#queues tr[data-queue="{queue}"]')
    expect(row).to_have_count(1)

    # The queue page: browse a message and open it.
    row.locator("a.queue-link").click()
    expect(page.locator("#queue-title")).to_have_text(queue)
    first = page.locator("#messages tr.message-row").first
    expect(first).to_be_visible()
    first.click()
    expect(page.locator("#messages tr.detail pre.body")).to_have_text(body)

    # A queue's tools for many messages: go to a position, open a message by its
    # id, read its whole body (JSON indented), see a scheduled delivery's time.
    page.goto(f"{url}/#/queue/{REPORTS}")
    page.fill("#goto-position", "2")
    page.press("#goto-position", "Enter")
    expect(page.locator(".pager")).to_contain_text("messages 2–2")
    page.locator("#messages tr.message-row").first.click()
    due = page.locator("#messages tr.detail dt:text-is('_AMQ_SCHED_DELIVERY') + dd")
    due_text = due.inner_text()
    due_ms = int(re.search(r"\((\d+)\)", due_text)[1])
    assert str(datetime.fromtimestamp(due_ms / 1000).year) in due_text, f"not a time: {due_text}"
    page.fill("#goto-position", "1")
    page.press("#goto-position", "Enter")
    expect(page.locator(".pager")).to_contain_text("messages 1–2")
    big_id = page.locator("#messages tr.message-row").first.get_attribute("data-id")
    page.fill("#open-id", big_id)
    page.press("#open-id", "Enter")
    found = page.locator("#found")
    expect(found.locator("h2").first).to_have_text("Message " + big_id)
    expect(found.locator("a.download")).to_have_attribute("href", re.compile(rf"/messages/{big_id}/body$"))
    found.locator(".show-body").click()
    expect(found.locator(".show-body")).to_have_count(0)
    whole = found.locator("pre.body").inner_text()
    assert whole.startswith('{\n  "items": [\n    0,') and whole.endswith("    999\n  ]\n}"), whole[-80:]

    # The dead letters of the queue, grouped; the group of REASON, opened.
    page.click("nav >> text=Dead letters")
    page.locator("a.dlq-link", has_text=dlq).click()
    groups = page.locator("#groups tr.group")
    # Reasons that differ only by numbers and ids: one group, with an example.
    masked = groups.filter(has=page.locator(".group-failure", has_text=GATEWAY_MASKED))
    expect(masked.locator(".count-pill")).to_have_text("2")
    expect(masked.locator(".example")).to_contain_text("e.g. gateway timeout after ")
    group = groups.filter(has=page.locator(".group-failure", has_text=reason))
    expect(group).to_have_count(1)
    expect(group).to_have_attribute("data-queue", queue)
    group.click()  # shows the group's messages
    page.locator("a.open-message").first.click()
    expect(page.locator(".history")).to_contain_text(reason)
    page.locator("a.open-message", has_text="hide").click()
    expect(page.locator(".history")).to_have_count(0)
    group.click()  # folds it again
    group.locator("input.group-check").check()
    expect(page.locator("#selection")).to_contain_text("selected")

    # A removal's confirmation names the messages it takes; a toast keeps off
    # its buttons. Cancelled.
    page.click("#remove")
    preview = page.locator("#preview")
    expect(preview.locator("h2")).to_have_text("Remove 3 messages?")
    expect(preview.locator(".ids li")).to_have_count(3)
    page.evaluate("toast('a toast over the confirmation?', true)")
    toast, confirm = page.locator("#toast").bounding_box(), page.locator("#confirm").bounding_box()
    overlaps = not (toast["x"] + toast["width"] <= confirm["x"] or confirm["x"] + confirm["width"] <= toast["x"]
                    or toast["y"] + toast["height"] <= confirm["y"] or confirm["y"] + confirm["height"] <= toast["y"])
    assert not overlaps, f"the toast {toast} covers the confirm button {confirm}"
    page.click("#cancel")
    expect(preview).to_have_count(0)

    # Retry: the preview says where each message goes; then confirm.
    page.click("#retry")
    preview = page.locator("#preview")
    expect(preview).to_contain_text("Retry preview")
    going = preview.locator("tr.going")
    expect(going.first).to_contain_text(queue)
    if screenshot:
        page.screenshot(path=screenshot, full_page=True)
    page.click("#confirm")
    expect(page.locator("#toast")).to_contain_text("retried")
    expect(group).to_have_count(0)

    if errors:
        raise AssertionError("the page reported errors: " + "; ".join(errors))


def credentials():
    """The console's login (HTTP basic), when the broker has users."""
    user = os.environ.get("REBOUND_CONSOLE_USER")
    if user is None:
        return None
    return {"username": user, "password": os.environ.get("REBOUND_CONSOLE_PASSWORD", "")}


def walk(run, *args):
    """Runs `run(page, *args)` in a fresh headless Chromium, logged in when the
    broker has users; exits 1 with why (and where) when it fails."""
    with tempfile.TemporaryDirectory(prefix="rebound-chromium-") as profile, sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            args=ARGS,
            viewport={"width": 1280, "height": 760},
            http_credentials=credentials(),
        )
        browser.set_default_timeout(TIMEOUT_MS)
        page = browser.new_page()
        try:
            run(page, *args)
        except Exception as e:
            print(f"FAILED at {page.url}: {e}", file=sys.stderr)
            sys.exit(1)
        finally:
            browser.close()


def main():
    url, queue, dlq, body, reason = sys.argv[1:6]
    screenshot = sys.argv[6] if len(sys.argv) > 6 else None
    walk(run, url, queue, dlq, body, reason, screenshot)
    print("console e2e: ok")


if __name__ == "__main__":
    main()
