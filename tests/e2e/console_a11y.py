"""The console by keyboard, for a screen reader, in the dark and on a phone, in a
real browser (headless Chromium).

Started by tests/blackbox/console_browser.rs with a broker whose queue QUEUE holds
messages and whose dead-letter queue DLQ holds a group of them:

    python3 console_a11y.py URL QUEUE DLQ

Sort headers, message rows and dead-letter groups work with Tab, Enter and Space,
and keep the focus over a refresh; every input has a label; nothing is a live
region that a refresh rewrites; the refresh pauses, and holds off while text is
selected; the page follows `prefers-color-scheme: dark`; at 390 px wide no view
scrolls sideways.
"""
import sys

from playwright.sync_api import expect

from console import walk

REFRESH_S = 3


def unlabelled(page):
    """The inputs of the view with no accessible name."""
    return page.evaluate(
        """[...document.querySelectorAll("input, select, textarea")]
            .filter((i) => !(i.labels?.length || i.getAttribute("aria-label") || i.getAttribute("aria-labelledby")))
            .map((i) => i.outerHTML)"""
    )


def drawn(page, view):
    return page.evaluate("(v) => performance.getEntriesByName('drawn:' + v).at(-1)?.startTime ?? 0", view)


def run(page, url, queue, dlq):
    views = [
        ("overview", "#/overview"),
        ("queues", "#/queues"),
        ("queue", f"#/queue/{queue}"),
        ("dead-letters", f"#/dead-letters/{dlq}"),
        ("redelivery", f"#/redelivery/{queue}"),
    ]
    page.goto(url + "/")
    expect(page.locator("main[aria-live], #view[aria-live]")).to_have_count(0)
    for view, path in views:
        page.goto(f"{url}/{path}")
        page.wait_for_function("(v) => performance.getEntriesByName('drawn:' + v).length > 0", arg=view)
        assert not unlabelled(page), f"{view}: inputs without a label: {unlabelled(page)}"

    # Sort headers: buttons, by keyboard.
    page.goto(f"{url}/#/queues")
    page.focus('button[data-sort="messages"]')
    page.keyboard.press("Enter")
    expect(page.locator('th:has(button[data-sort="messages"])')).to_have_attribute("aria-sort", "descending")

    # A message row opens with Enter and keeps the focus over a refresh.
    page.goto(f"{url}/#/queue/{queue}")
    row = page.locator("#messages tr.message-row").first
    row.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#messages tr.detail")).to_have_count(1)
    expect(page.locator("#messages tr.message-row").first).to_have_attribute("aria-expanded", "true")
    since = drawn(page, "queue")
    page.wait_for_function("([v, t]) => performance.getEntriesByName('drawn:' + v).at(-1).startTime > t", arg=["queue", since])
    focus = page.evaluate("document.activeElement.getAttribute('data-focus')")
    assert focus and focus.startswith("m:"), f"the focus went to {focus!r} after a refresh"

    # A dead-letter group opens with Space; selected text survives the refresh.
    page.goto(f"{url}/#/dead-letters/{dlq}")
    group = page.locator("#groups tr.group").first
    group.focus()
    page.keyboard.press(" ")
    expect(page.locator("#groups tr.detail")).to_have_count(1)
    page.evaluate("""() => {
        const range = document.createRange();
        range.selectNodeContents(document.querySelector("#groups .group-reason"));
        document.getSelection().removeAllRanges();
        document.getSelection().addRange(range);
    }""")
    selected = page.evaluate("document.getSelection().toString()")
    page.wait_for_timeout((REFRESH_S + 1) * 1000)
    assert page.evaluate("document.getSelection().toString()") == selected, "a refresh cleared the selection"
    page.evaluate("document.getSelection().removeAllRanges()")

    # Paused, nothing redraws; resumed, it does.
    page.click("#refresh-toggle")
    expect(page.locator("#refresh-toggle")).to_have_attribute("aria-pressed", "true")
    since = drawn(page, "dead-letters")
    page.wait_for_timeout((REFRESH_S + 1) * 1000)
    assert drawn(page, "dead-letters") == since, "the view redrew while the refresh was paused"
    page.click("#refresh-toggle")
    expect(page.locator("#refresh-toggle")).to_have_attribute("aria-pressed", "false")
    page.wait_for_function("([v, t]) => performance.getEntriesByName('drawn:' + v).at(-1).startTime > t", arg=["dead-letters", since])

    # Dark.
    page.emulate_media(color_scheme="dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    rgb = [int(c) for c in background[background.index("(") + 1:-1].split(",")[:3]]
    assert sum(rgb) < 3 * 80, f"the page is not dark in dark mode: {background}"

    # A phone.
    page.set_viewport_size({"width": 390, "height": 800})
    for view, path in views:
        page.goto(f"{url}/{path}")
        page.wait_for_function("(v) => performance.getEntriesByName('drawn:' + v).length > 0", arg=view)
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 390, f"{view} is {wide} px wide at 390 px"
        expect(page.locator("nav >> text=Dead letters")).to_be_in_viewport()


def main():
    url, queue, dlq = sys.argv[1:4]
    walk(run, url, queue, dlq)
    print("console a11y e2e: ok")


if __name__ == "__main__":
    main()
