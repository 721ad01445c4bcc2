// rebound console. Plain JavaScript, no dependencies. Broker data reaches the page
// only as text (textContent, attribute values), never as markup.
"use strict";

const REFRESH_MS = 3000;

// ---------- small helpers ----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replaces a node's children; null, undefined and false children are left out.
function put(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

// Sets a node's text only when it changes, so that an unchanged refresh touches
// nothing (and announces nothing).
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// Marks that a view finished drawing from fresh data (performance entries
// "drawn:<view>"), for the console's render-time test.
function drawn(view) {
  performance.clearMarks("drawn:" + view);
  performance.mark("drawn:" + view);
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  };
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    setLive(false, "broker unreachable");
    throw new Error("the broker does not answer");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || response.status + " " + response.statusText);
  setLive(true);
  return data;
}

function setLive(ok, text) {
  document.getElementById("live-dot").className = "dot " + (ok ? "ok" : "bad");
  setText(document.getElementById("live-text"), text || (paused ? "refresh paused" : "live · refreshes every " + REFRESH_MS / 1000 + " s"));
}

// A row that opens and closes (a message, a dead-letter group): focusable, and
// toggled by Enter or Space as by a click. `key` finds it again after a redraw.
function toggleRow(attrs, key, open, toggle) {
  return el("tr", { ...attrs, tabindex: 0, "data-focus": key, "aria-expanded": String(open), onclick: toggle, onkeydown: (e) => {
    if (e.target === e.currentTarget && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault();
      toggle();
    }
  } });
}

let toastTimer;
function toast(text, error) {
  const node = document.getElementById("toast");
  node.textContent = text;
  node.className = "toast" + (error ? " error" : "");
  node.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { node.hidden = true; }, error ? 8000 : 4000);
}

const fmt = {
  int: (n) => Number(n || 0).toLocaleString("en-US"),
  rate: (n) => (n >= 100 ? Math.round(n).toLocaleString("en-US") : Number(n || 0).toFixed(n > 0 && n < 10 ? 1 : 0)),
  bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    n = Number(n || 0);
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
  },
  ms(ms) {
    ms = Number(ms);
    if (ms < 1000) return ms + " ms";
    const s = ms / 1000;
    if (s < 60) return (Number.isInteger(s) ? s : s.toFixed(1)) + " s";
    const parts = [];
    let rest = Math.round(s);
    for (const [unit, size] of [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]]) {
      if (rest >= size) { parts.push(Math.floor(rest / size) + " " + unit); rest %= size; }
    }
    return parts.slice(0, 2).join(" ");
  },
  range(pair) {
    return pair[0] === pair[1] ? fmt.ms(pair[0]) : fmt.ms(pair[0]) + " – " + fmt.ms(pair[1]);
  },
  time: (ms) => (ms ? new Date(Number(ms)).toLocaleString() : "—"),
  ago(ms) {
    if (!ms) return "—";
    const d = Date.now() - Number(ms);
    return d < 0 ? "in " + fmt.ms(-d) : fmt.ms(Math.max(d, 0)) + " ago";
  },
};

// Message ids are strings of decimal digits, as the API gives them: 64-bit, past
// what a JavaScript number holds exactly, so never turned into numbers. In
// order: the shorter first, then digit by digit.
function compareIds(a, b) {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

function hashFor(view, name) {
  return "#/" + view + (name === undefined ? "" : "/" + encodeURIComponent(name));
}
function queueLink(name) {
  return el("a", { href: hashFor("queue", name), class: "queue-link", text: name });
}

// ---------- routing and refresh ----------

let current = null; // { name, refresh() }
let timer = null;
let paused = false; // the operator paused the auto-refresh

function route() {
  const [view, arg] = location.hash.replace(/^#\/?/, "").split("/");
  const name = arg === undefined ? undefined : decodeURIComponent(arg);
  const views = { overview: Overview, queues: Queues, queue: QueuePage, "dead-letters": DeadLetters, redelivery: Redelivery };
  const View = views[view] || Overview;
  for (const a of document.querySelectorAll("[data-nav]")) {
    const nav = a.getAttribute("data-nav");
    a.classList.toggle("active", nav === view || (nav === "queues" && view === "queue") || (!views[view] && nav === "overview"));
  }
  const root = document.getElementById("view");
  put(root);
  current = new View(root, name);
  tick();
}

// Refreshes the view now (an operator's action), then every REFRESH_MS unless
// paused. A redraw keeps the focus where it was (by `data-focus` or id).
async function tick() {
  clearTimeout(timer);
  const view = current;
  const focused = document.activeElement;
  const key = focused && (focused.getAttribute("data-focus") ? `[data-focus="${CSS.escape(focused.getAttribute("data-focus"))}"]` : focused.id ? "#" + CSS.escape(focused.id) : null);
  try {
    await view.refresh();
  } catch (e) {
    view.fail && view.fail(e);
  }
  if (key && !document.contains(focused)) document.querySelector(key)?.focus();
  if (view === current) timer = setTimeout(autoRefresh, REFRESH_MS);
}

// The timed refresh: skipped while paused, or while the operator has text of
// the view selected (a redraw would clear it).
function autoRefresh() {
  const selection = document.getSelection();
  const selecting = selection && !selection.isCollapsed && document.getElementById("view").contains(selection.anchorNode);
  if (paused || selecting) timer = setTimeout(autoRefresh, REFRESH_MS);
  else tick();
}

function togglePause() {
  paused = !paused;
  const button = document.getElementById("refresh-toggle");
  button.setAttribute("aria-pressed", String(paused));
  button.textContent = paused ? "Resume refresh" : "Pause refresh";
  setLive(true);
  if (!paused) tick();
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("refresh-toggle").addEventListener("click", togglePause);
  route();
});

function errorBox(root, e) {
  put(root, el("div", { class: "error-box", text: e.message }));
}

// ---------- overview ----------

class Overview {
  constructor(root) {
    this.root = root;
  }
  fail(e) { errorBox(this.root, e); }
  async refresh() {
    const o = await api("/api/overview");
    const dlqs = o.dead_letters_waiting;
    const last = o.rates[o.rates.length - 1] || {};
    const card = (k, v, cls) => el("div", { class: "card " + (cls || "") }, el("div", { class: "k", text: k }), el("div", { class: "v" + (typeof v === "string" && v.length > 12 ? " small" : ""), text: v }));
    put(this.root, 
      el("h1", { text: "Overview" }),
      el("p", { class: "sub", text: "rebound " + o.version + " · up " + fmt.ms(o.uptime_ms) }),
      el("div", { class: "cards" },
        card("gRPC", o.listen.grpc),
        card("HTTP", o.listen.http),
        card("Addresses", fmt.int(o.addresses)),
        card("Queues", fmt.int(o.gauges.queues)),
        card("Messages", fmt.int(o.gauges.messages)),
        card("Delivering", fmt.int(o.gauges.delivering)),
        card("Scheduled", fmt.int(o.gauges.scheduled)),
        card("In outage", fmt.int(o.outages.count), o.outages.count ? "bad" : ""),
        card("Connections", fmt.int(o.connections)),
        card("Consumers", fmt.int(o.gauges.consumers)),
        card("Transactions", fmt.int(o.open_transactions)),
        card("In / s", fmt.rate(last.added || 0)),
        card("Acked / s", fmt.rate(last.acked || 0)),
        card("Dead-lettered", fmt.int(o.totals.dead_lettered), o.totals.dead_lettered ? "bad" : ""),
        card("Commits / s", fmt.rate(last.commits || 0)),
        card("Ops per fsync", fmt.rate(last.ops_per_sync || 0)),
        card("Disk used", fmt.bytes(o.store.disk_bytes)),
      ),
      el("div", { class: "panel" },
        el("h2", { text: "Messages per second, last " + fmt.ms(Math.max(o.rates.length, 1) * o.sample_every_ms) }),
        rateChart(o.rates),
        el("div", { class: "legend" },
          el("span", { class: "s-added", text: "in" }),
          el("span", { class: "s-acked", text: "acked" }),
          el("span", { class: "s-redelivered", text: "redelivered" }),
          el("span", { class: "s-dead", text: "dead-lettered" })),
      ),
      o.outages.count ? el("div", { class: "panel", id: "outages" },
        el("h2", { text: "Queues in outage: delivery paused" }),
        el("table", {}, el("tbody", {}, o.outages.queues.map((x) => el("tr", {},
          el("td", {}, queueLink(x.name)),
          el("td", { class: "muted", text: "since " + fmt.time(x.outage_since_ms) }),
          el("td", { text: probeText(x) }))))),
        o.outages.count > o.outages.queues.length ? el("p", { class: "muted", text: `The longest ${o.outages.queues.length} of ${fmt.int(o.outages.count)}; sort the Queues page by State for all.` }) : null) : null,
      el("div", { class: "panel" },
        el("h2", { text: "Dead letters waiting" }),
        dlqs.count
          ? el("table", { id: "waiting" }, el("tbody", {}, dlqs.queues.map((x) => el("tr", {},
            el("td", {}, el("a", { href: hashFor("dead-letters", x.name), text: x.name })),
            el("td", { class: "muted", text: "on " + x.address }),
            el("td", { class: "num" }, el("span", { class: "count-pill", text: fmt.int(x.messages) }))))))
          : el("div", { class: "muted", text: "None: no dead-letter queue holds a message." }),
        dlqs.count > dlqs.queues.length ? el("p", { class: "muted", text: `The fullest ${dlqs.queues.length} of ${fmt.int(dlqs.count)}; the Dead letters page lists them all.` }) : null),
      el("div", { class: "panel" },
        el("h2", { text: "Totals since start" }),
        el("table", {}, el("tbody", {},
          ...[["added", o.totals.added], ["acked", o.totals.acked], ["redelivered (nacks)", o.totals.redelivered],
            ["dead-lettered", o.totals.dead_lettered], ["expired", o.totals.expired], ["dropped", o.totals.dropped],
            ["removed by an operator", o.totals.removed], ["moved out (move, retry)", o.totals.moved_out],
            ["store commits", o.store.commits], ["store ops", o.store.ops], ["fsyncs", o.store.syncs],
            ["bytes queued", fmt.bytes(o.gauges.bytes)]]
            .map(([k, v]) => el("tr", {}, el("td", { class: "muted", text: k }), el("td", { class: "num", text: typeof v === "number" ? fmt.int(v) : v })))))),
    );
    drawn("overview");
  }
}

function rateChart(rates) {
  const W = 1000, H = 190, L = 44, B = 22, T = 8;
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "message rates" });
  const series = [["added", "#2f6fed"], ["acked", "#12a36f"], ["redelivered", "#e0901b"], ["dead_lettered", "#d2394a"]];
  let max = 1;
  for (const r of rates) for (const [k] of series) max = Math.max(max, r[k]);
  const nice = Math.pow(10, Math.floor(Math.log10(max)));
  max = Math.ceil(max / nice) * nice;
  for (let i = 0; i <= 4; i++) {
    const y = T + (H - B - T) * (1 - i / 4);
    chart.append(svg("line", { class: "grid", x1: L, x2: W, y1: y, y2: y }));
    const label = svg("text", { class: "axis", x: L - 6, y: y + 4, "text-anchor": "end" });
    label.textContent = fmt.rate((max * i) / 4);
    chart.append(label);
  }
  if (rates.length < 2) {
    const wait = svg("text", { class: "axis", x: W / 2, y: H / 2, "text-anchor": "middle" });
    wait.textContent = "collecting samples…";
    chart.append(wait);
    return chart;
  }
  const x = (i) => L + ((W - L) * i) / (rates.length - 1);
  const y = (v) => T + (H - B - T) * (1 - v / max);
  for (const [key, color] of series) {
    const points = rates.map((r, i) => x(i).toFixed(1) + "," + y(r[key]).toFixed(1)).join(" ");
    chart.append(svg("polyline", { points, fill: "none", stroke: color, "stroke-width": 2, "vector-effect": "non-scaling-stroke", "stroke-linejoin": "round" }));
  }
  const first = svg("text", { class: "axis", x: L, y: H - 4 });
  first.textContent = new Date(rates[0].at_ms).toLocaleTimeString();
  const now = svg("text", { class: "axis", x: W, y: H - 4, "text-anchor": "end" });
  now.textContent = "now";
  chart.append(first, now);
  return chart;
}

// ---------- queues ----------

// [key, header, class]; the broker sorts by every column but the last two.
const QUEUE_COLUMNS = [
  ["name", "Queue"], ["address", "Address"], ["routing_type", "Routing"], ["state", "State"], ["messages", "Messages", "num"],
  ["delivering", "Delivering", "num"], ["scheduled", "Scheduled", "num"], ["consumers", "Consumers", "num"],
  ["in_per_s", "In/s", "num"], ["out_per_s", "Out/s", "num"], ["dead_lettered", "Dead-lettered", "num"],
  ["filter", "Filter", "unsorted"], ["settings_matches", "Settings match", "unsorted"],
];

const QUEUE_ROWS = 50;

// One page of the queues at a time, sorted and filtered by the broker; a refresh
// replaces only the rows whose figures changed.
class Queues {
  constructor(root) {
    this.root = root;
    this.sort = { key: "name", dir: "asc" };
    this.token = "";
    let typing;
    this.search = el("input", { type: "search", id: "queue-filter", "aria-label": "Filter queues by queue or address", placeholder: "Filter by queue or address…", oninput: () => {
      clearTimeout(typing);
      typing = setTimeout(() => { this.token = ""; tick(); }, 200);
    } });
    this.count = el("span", { class: "muted", id: "queue-count", role: "status" });
    this.prev = el("button", { id: "queues-prev", onclick: () => this.turn(this.page.prev_page_token), text: "← Previous" });
    this.next = el("button", { id: "queues-next", onclick: () => this.turn(this.page.next_page_token), text: "Next →" });
    this.headers = QUEUE_COLUMNS.map(([key, label, cls]) => el("th", { class: cls, scope: "col" },
      cls === "unsorted" ? label : el("button", { class: "sort", "data-sort": key, onclick: () => this.sortBy(key, cls === "num"), text: label })));
    this.body = el("tbody", {});
    this.empty = el("div", { class: "empty", hidden: true });
    this.table = el("table", { id: "queues" }, el("thead", {}, el("tr", {}, this.headers)), this.body);
    this.box = el("div", { class: "panel" }, this.table, this.empty);
    root.append(el("h1", { text: "Addresses and queues" }),
      el("p", { class: "sub", text: "Live counts; rates over the last sample interval. Sort by any column; the broker sorts and pages." }),
      el("div", { class: "toolbar" }, this.search, el("span", { class: "grow" }), this.count, this.prev, this.next),
      this.box);
  }
  fail(e) { put(this.empty, el("div", { class: "error-box", text: e.message })); this.empty.hidden = false; }
  sortBy(key, numeric) {
    const dir = key === this.sort.key ? (this.sort.dir === "asc" ? "desc" : "asc") : numeric ? "desc" : "asc";
    this.sort = { key, dir };
    this.token = "";
    tick();
  }
  turn(token) {
    this.token = token;
    tick();
  }
  async refresh() {
    const query = new URLSearchParams({ sort: this.sort.key, dir: this.sort.dir, filter: this.search.value.trim(), page_token: this.token, limit: QUEUE_ROWS });
    this.page = await api("/api/queues?" + query);
    this.draw();
  }
  draw() {
    const p = this.page;
    const shown = p.queues.length ? `${fmt.int(p.offset + 1)}–${fmt.int(p.offset + p.queues.length)} of ${fmt.int(p.total)} queues` : `0 of ${fmt.int(p.total)} queues`;
    setText(this.count, shown + (p.total < p.shown ? ` (filtered from ${fmt.int(p.shown)})` : ""));
    this.prev.disabled = !p.prev_page_token;
    this.next.disabled = !p.next_page_token;
    for (const th of this.headers) {
      const key = th.firstElementChild?.getAttribute("data-sort");
      if (key === this.sort.key) th.setAttribute("aria-sort", this.sort.dir === "asc" ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    const old = new Map([...this.body.children].map((tr) => [tr.getAttribute("data-queue"), tr]));
    const rows = p.queues.map((q) => {
      const sig = JSON.stringify(q);
      const kept = old.get(q.name);
      if (kept && kept.sig === sig) return kept;
      const tr = queueRow(q);
      tr.sig = sig;
      return tr;
    });
    if (rows.length !== this.body.children.length || rows.some((tr, i) => this.body.children[i] !== tr)) this.body.replaceChildren(...rows);
    this.table.hidden = !rows.length;
    this.empty.hidden = rows.length > 0;
    if (!rows.length) put(this.empty, p.shown ? "No queue matches." : "No queues yet.");
    drawn("queues");
  }
}

// A queue's state: normal, or in outage since when and what comes next.
function stateOf(q) {
  if (q.state !== "outage") return el("span", { class: "badge ready", text: "normal" });
  return el("span", { class: "badge outage", title: "delivery paused since " + fmt.time(q.outage_since_ms) + "; " + probeText(q), text: "outage" });
}

// When an outage's next probe goes: a time in the past is a probe about to go.
function probeText(q) {
  if (!q.next_probe_at_ms) return "a probe is out";
  return q.next_probe_at_ms <= Date.now() ? "probe due now" : "next probe " + fmt.ago(q.next_probe_at_ms);
}

function queueRow(q) {
  return el("tr", { "data-queue": q.name },
    el("td", {}, queueLink(q.name), q.dead_letter_queue ? el("a", { class: "badge dlq", href: hashFor("dead-letters", q.name), text: "dead letters" }) : null,
      q.served_by ? el("span", { class: "badge", title: "the node serving this queue" + (q.unreachable ? " (unreachable: its figures are not shown)" : ""), text: q.served_by }) : null),
    el("td", {}, el("a", { href: hashFor("redelivery", q.address), title: "redelivery policy", text: q.address })),
    el("td", {}, el("span", { class: "badge", text: q.routing_type })),
    el("td", {}, stateOf(q)),
    el("td", { class: "num", text: fmt.int(q.messages) }),
    el("td", { class: "num", text: fmt.int(q.delivering) }),
    el("td", { class: "num", text: fmt.int(q.scheduled) }),
    el("td", { class: "num", text: fmt.int(q.consumers) }),
    el("td", { class: "num", text: fmt.rate(q.in_per_s) }),
    el("td", { class: "num", text: fmt.rate(q.out_per_s) }),
    el("td", { class: "num" + (q.dead_lettered ? " skip" : ""), text: fmt.int(q.dead_lettered) }),
    el("td", { class: "mono", text: q.filter || "" }),
    el("td", {}, q.settings_matches.length ? q.settings_matches.map((m) => el("span", { class: "badge match", text: m })) : el("span", { class: "muted", text: "defaults" })));
}

// ---------- one queue ----------

const PAGE = 25;

class QueuePage {
  constructor(root, name) {
    this.root = root;
    this.name = name;
    this.offset = 0;
    this.filter = "";
    this.open = new Set();
    this.head = el("div", {});
    this.list = el("div", {});
    this.settings = el("div", {});
    this.filterInput = el("input", { type: "search", "aria-label": "Selector", placeholder: "Selector, e.g. color = 'red'", onchange: () => { this.filter = this.filterInput.value; this.offset = 0; tick(); } });
    const position = el("input", { type: "number", min: 1, id: "goto-position", "aria-label": "Go to position", placeholder: "position" });
    const id = el("input", { type: "text", inputmode: "numeric", pattern: "[0-9]+", required: true, id: "open-id", "aria-label": "Open message id", placeholder: "message id" });
    this.found = el("div", {});
    const go = (e) => { e.preventDefault(); this.offset = Math.max(0, Number(position.value) - 1); tick(); };
    const open = async (e) => {
      e.preventDefault();
      try {
        const m = await api(`/api/queues/${encodeURIComponent(this.name)}/messages/${encodeURIComponent(id.value.trim())}`);
        put(this.found, el("div", { class: "panel", id: "found" }, messageDetail(m, this.name)));
      } catch (err) {
        toast(err.message, true);
      }
    };
    root.append(this.head,
      el("div", { class: "panel" },
        el("div", { class: "toolbar" }, el("h2", { text: "Messages" }), el("span", { class: "grow" }),
          el("form", { class: "inline", onsubmit: go }, position, el("button", { type: "submit", text: "Go" })),
          el("form", { class: "inline", onsubmit: open }, id, el("button", { type: "submit", text: "Open" })),
          this.filterInput),
        this.found,
        this.list),
      el("div", { class: "panel" }, el("h2", { text: "Effective address-settings" }), this.settings));
  }
  fail(e) { put(this.head, el("div", { class: "error-box", text: e.message })); }
  async refresh() {
    const q = await api("/api/queues/" + encodeURIComponent(this.name));
    const page = await api(`/api/queues/${encodeURIComponent(this.name)}/messages?offset=${this.offset}&limit=${PAGE}&filter=${encodeURIComponent(this.filter)}`);
    const card = (k, v) => el("div", { class: "card" }, el("div", { class: "k", text: k }), el("div", { class: "v", text: v }));
    put(this.head, 
      el("div", { class: "crumbs" }, el("a", { href: "#/queues", text: "Queues" }), " / ", q.address),
      el("h1", { id: "queue-title", text: q.name }),
      el("p", { class: "sub" }, q.routing_type + " queue on address ", el("a", { href: hashFor("redelivery", q.address), text: q.address }),
        q.filter ? " · filter " + q.filter : "", q.durable ? " · durable" : " · not durable", " · ",
        el("a", { href: hashFor("dead-letters", q.name), text: "view as dead letters" }), " · ",
        el("a", { href: hashFor("redelivery", q.address), text: "redelivery policy" })),
      el("div", { class: "cards" },
        card("Messages", fmt.int(q.messages)), card("Delivering", fmt.int(q.delivering)),
        card("Scheduled", fmt.int(q.scheduled)), card("Consumers", fmt.int(q.consumers)),
        card("In / s", fmt.rate(q.in_per_s)), card("Out / s", fmt.rate(q.out_per_s)),
        card("Redelivered", fmt.int(q.redelivered)), card("Dead-lettered", fmt.int(q.dead_lettered)),
        card("Removed", fmt.int(q.removed)), card("Moved out", fmt.int(q.moved_out)),
        card("Bytes", fmt.bytes(q.bytes)),
        card("Paged", fmt.int(q.paged_messages) + " · " + fmt.bytes(q.paged_bytes) + (q.counting ? " · counting" : "")),
        card("State", q.state === "outage"
          ? "outage since " + new Date(q.outage_since_ms).toLocaleTimeString() + " · " + probeText(q)
          : "normal")),
      q.state === "outage" ? el("div", { class: "toolbar outage-bar" },
        el("span", { class: "badge outage", text: "outage" }),
        el("span", { text: "Delivery is paused: one probe message goes at a time until one succeeds." }),
        el("span", { class: "grow" }),
        el("button", { id: "probe-now", disabled: !q.next_probe_at_ms, onclick: () => this.act("probe", (a) => a.probing ? "Probe sent." : "A probe is already out."), text: "Probe now" }),
        el("button", { class: "primary", id: "resume", onclick: () => this.act("resume", (a) => a.resumed ? "Delivery resumed." : "The queue was not in outage."), text: "Resume delivery" })) : null);
    this.drawMessages(page);
    put(this.settings, settingsTable(q.settings));
    drawn("queue");
  }
  // An action on the queue itself (resume, probe); `said` words its answer.
  async act(kind, said) {
    try {
      toast(said(await api(`/api/queues/${encodeURIComponent(this.name)}/${kind}`, {})));
      tick();
    } catch (e) {
      toast(e.message, true);
    }
  }
  drawMessages(page) {
    const rows = [];
    for (const m of page.messages) {
      const opened = this.open.has(m.id);
      const row = toggleRow({ class: "message-row", "data-id": m.id }, "m:" + m.id, opened, () => { opened ? this.open.delete(m.id) : this.open.add(m.id); tick(); });
      rows.push(row);
      row.append(
        el("td", { class: "mono", text: m.id }),
        el("td", { class: "num", text: m.priority }),
        el("td", { class: "num", text: m.delivery_count }),
        el("td", {}, stateBadge(m)),
        el("td", { class: "mono muted", text: propertySummary(m.properties) }),
        el("td", { class: "mono", text: (m.body_encoding === "hex" ? "0x " : "") + m.body_preview.slice(0, 80) }),
        el("td", { class: "num muted", text: fmt.bytes(m.body_size) }));
      if (opened) rows.push(el("tr", { class: "detail" }, el("td", { colspan: 7 }, messageDetail(m, this.name))));
    }
    put(this.list, 
      page.messages.length
        ? el("table", { id: "messages" },
          el("thead", {}, el("tr", {}, ...["Id", "Priority", "Deliveries", "State", "Properties", "Body", "Size"].map((h, i) => el("th", { class: [1, 2, 6].includes(i) ? "num" : "", text: h })))),
          el("tbody", {}, rows))
        : el("div", { class: "empty", text: this.offset ? "No more messages." : "The queue holds no messages" + (this.filter ? " that match." : ".") }),
      page.window_ended ? el("p", { class: "window-end", text: `The console browses the first ${fmt.int(page.window)} messages of a queue, and this one holds more: narrow it with a selector, or open a message by its id.` }) : null,
      el("div", { class: "pager" },
        el("span", { class: "muted", text: page.messages.length ? `messages ${this.offset + 1}–${this.offset + page.messages.length}` : "" }),
        el("button", { disabled: this.offset === 0, onclick: () => { this.offset = Math.max(0, this.offset - PAGE); tick(); }, text: "← Previous" }),
        el("button", { disabled: !page.more, onclick: () => { this.offset += PAGE; tick(); }, text: "Next →" })));
  }
}

function stateBadge(m) {
  const badge = el("span", { class: "badge " + m.state, text: m.state });
  if (m.state !== "scheduled") return badge;
  // A message never delivered is a scheduled send (due), else a redelivery (back).
  const when = (m.delivery_count ? " back " : " due ") + fmt.ago(m.scheduled_until_ms);
  return el("span", {}, badge, el("span", { class: "muted nowrap", text: when }));
}

function propertySummary(props) {
  return Object.entries(props)
    .filter(([k]) => !k.startsWith("_"))
    .map(([k, v]) => k + "=" + v.value)
    .join(", ")
    .slice(0, 90);
}

// Whole bodies fetched on request, by queue and id, so that a refresh keeps them.
const wholeBodies = new Map();

// A body shown as JSON when it is JSON, indented.
function pretty(text) {
  if (!/^\s*[[{]/.test(text)) return text;
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

function bodyView(m, queue) {
  const url = `/api/queues/${encodeURIComponent(queue)}/messages/${m.id}/body`;
  const key = queue + "\n" + m.id;
  const whole = wholeBodies.get(key);
  const pre = el("pre", { class: "body", text: (m.body_encoding === "text" ? pretty(whole ?? m.body_preview) : m.body_preview) || "(empty)" });
  const more = m.body_truncated && m.body_encoding === "text" && whole === undefined;
  const show = more ? el("button", { class: "show-body", text: "Show the whole body", onclick: async () => {
    try {
      const response = await fetch(url);
      if (!response.ok) throw new Error("the body could not be read: " + response.status + " " + response.statusText);
      wholeBodies.set(key, await response.text());
      pre.textContent = pretty(wholeBodies.get(key));
      show.remove();
    } catch (e) {
      toast(e.message, true);
    }
  } }) : null;
  const shown = m.body_truncated && whole === undefined ? " · the start only" : "";
  return [
    el("div", { class: "toolbar" },
      el("h2", { text: "Body · " + fmt.bytes(m.body_size) + (m.body_encoding === "hex" ? " · hex" : "") + shown }),
      el("span", { class: "grow" }), show,
      el("a", { class: "download", href: url, download: `message-${m.id}.bin`, text: "Download" })),
    pre,
  ];
}

// A property's value; the time of a scheduled delivery as a time.
function propertyText(k, v) {
  if (k === "_AMQ_SCHED_DELIVERY" && v.type === "int") return fmt.time(v.value) + "  (" + v.value + ")";
  return v.value + (v.type === "string" ? "" : "  (" + v.type + ")");
}

function messageDetail(m, queue) {
  const props = Object.entries(m.properties).sort(([a], [b]) => a.localeCompare(b));
  return el("div", { class: "split" },
    el("div", {},
      el("h2", { text: "Message " + m.id }),
      el("dl", { class: "kv" },
        ...[["address", m.address], ["priority", m.priority], ["durable", m.durable], ["sent", fmt.time(m.timestamp_ms)],
          ["expires", m.expiration_ms ? fmt.time(m.expiration_ms) : "never"], ["deliveries", m.delivery_count],
          ["state", m.state + (m.scheduled_until_ms ? " until " + fmt.time(m.scheduled_until_ms) : "")],
          ["redrives", m.redrives]]
          .flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]),
        ...props.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: propertyText(k, v) })])),
    ),
    el("div", {},
      m.failures.length ? el("div", {}, el("h2", { text: "Failure history" }), failureHistory(m)) : null,
      bodyView(m, queue)));
}

function failureHistory(m) {
  // A dead letter says how often it was delivered; a live message counts itself.
  const counted = m.properties._REBOUND_DELIVERY_COUNT;
  const deliveries = counted ? Number(counted.value) : m.delivery_count;
  const items = m.failures.map((f, i) => el("li", {},
    el("div", { class: "when", text: "delivery " + (deliveries - m.failures.length + i + 1) + " failed · " + fmt.time(f.at_ms) }),
    el("div", { class: "group-failure", text: f.reason })));
  if (m.dead_letter_reason !== null) items.push(el("li", {},
    el("div", { class: "when", text: "dead-lettered · " + fmt.time(m.timestamp_ms) }),
    el("div", { class: "group-reason", text: m.dead_letter_reason || "unknown reason" }),
    m.origin ? el("div", { class: "muted", text: "from queue " + m.origin.queue + " on " + m.origin.address }) : null));
  return el("ul", { class: "history" }, items);
}

function settingsTable(settings) {
  return el("table", { class: "settings" },
    el("thead", {}, el("tr", {}, el("th", { text: "Key" }), el("th", { text: "Value" }), el("th", { text: "From" }))),
    el("tbody", {}, settings.map((s) => el("tr", {},
      el("td", { class: "mono", text: s.key }),
      el("td", { class: "mono", text: s.value }),
      el("td", {}, s.source.startsWith("match ") ? el("span", { class: "badge match", text: s.source.slice(6).replace(/^"(.*)"$/, "$1") }) : el("span", { class: "muted", text: s.source }))))));
}

// ---------- dead letters ----------

// Which messages a move or removal takes, as the confirmation names them.
const LISTED_IDS = 100;
function selectionList(body) {
  if (!body.ids) return el("p", { class: "selection-list" }, "The messages that match the selector ", el("code", { text: body.filter }), ".");
  const ids = [...body.ids].sort(compareIds);
  return el("div", { class: "selection-list" },
    el("span", { class: "muted", text: "Messages " }),
    el("ul", { class: "ids" }, ids.slice(0, LISTED_IDS).map((id) => el("li", { class: "mono", text: id }))),
    ids.length > LISTED_IDS ? el("span", { class: "muted", text: `… and ${ids.length - LISTED_IDS} more` }) : null);
}

// A group's reason as one of its messages wrote it, when masking changed it.
function example(masked, original) {
  return original && original !== masked ? el("div", { class: "muted example", text: "e.g. " + original }) : null;
}

class DeadLetters {
  constructor(root, name) {
    this.root = root;
    this.name = name;
    this.selected = new Set(); // message ids (strings)
    this.expanded = new Set(); // group keys
    this.preview = null; // { kind, ids, answer, to_address }
    this.details = new Map(); // id -> message
  }
  fail(e) { errorBox(this.root, e); }
  async refresh() {
    if (!this.name) return this.pick();
    if (this.preview) return; // the operator is reading a preview: hold still
    this.data = await api(`/api/queues/${encodeURIComponent(this.name)}/dead-letters`);
    const known = new Set(this.data.groups.flatMap((g) => g.message_ids));
    for (const id of this.selected) if (!known.has(id)) this.selected.delete(id);
    this.draw();
  }
  async pick() {
    this.bar = null;
    const page = await api("/api/queues?dead_letters=true&sort=messages&dir=desc&limit=500");
    const dlqs = page.queues;
    put(this.root, el("h1", { text: "Dead letters" }),
      el("p", { class: "sub", text: "Queues on a dead-letter address of some address's settings. Any queue can be opened as dead letters from its page." }),
      el("div", { class: "panel" }, dlqs.length
        ? el("table", {}, el("thead", {}, el("tr", {}, el("th", { text: "Queue" }), el("th", { class: "num", text: "Messages" }), el("th", { text: "Address" }))),
          el("tbody", {}, dlqs.map((q) => el("tr", {},
            el("td", {}, el("a", { href: hashFor("dead-letters", q.name), class: "dlq-link", text: q.name })),
            el("td", { class: "num" }, el("span", { class: "count-pill", text: fmt.int(q.messages) })),
            el("td", { text: q.address })))))
        : el("div", { class: "empty", text: "No dead-letter queues yet." }),
        page.next_page_token ? el("p", { class: "muted", text: `The fullest ${dlqs.length} of ${fmt.int(page.total)}; the Queues page pages through them all.` }) : null));
    drawn("dead-letters");
  }
  key(g) { return JSON.stringify([g.orig_address, g.orig_queue, g.reason, g.last_failure]); }
  selection() {
    const filter = this.filterInput ? this.filterInput.value.trim() : "";
    if (this.selected.size) return { ids: [...this.selected] };
    if (filter) return { filter };
    return null;
  }
  describeSelection() {
    if (this.selected.size) return this.selected.size + " selected";
    const filter = this.filterInput ? this.filterInput.value.trim() : "";
    return filter ? "filter: " + filter : "nothing selected";
  }
  // The parts of the page, made once, so that a refresh never takes the focus
  // from the operator's inputs.
  layout() {
    this.head = el("div", {});
    this.filterInput = el("input", { type: "text", id: "dl-filter", "aria-label": "Selector of the messages to act on", placeholder: "or a selector, e.g. _AMQ_ORIG_QUEUE = 'orders'", oninput: () => this.drawBar() });
    this.toInput = el("input", { type: "text", id: "move-to", "aria-label": "Address to move to", placeholder: "move to address…" });
    this.selText = el("span", { class: "sel", id: "selection" });
    this.buttons = {
      retry: el("button", { class: "primary", id: "retry", onclick: () => this.dryRun("retry"), text: "Retry…" }),
      move: el("button", { id: "move", onclick: () => this.dryRun("move"), text: "Move…" }),
      remove: el("button", { class: "danger", id: "remove", onclick: () => this.dryRun("remove"), text: "Remove…" }),
      clear: el("button", { onclick: () => { this.selected.clear(); this.draw(); }, text: "Clear" }),
    };
    const b = this.buttons;
    this.bar = el("div", { class: "actionbar" }, this.selText, this.filterInput, el("span", { class: "grow" }), b.retry, this.toInput, b.move, b.remove, b.clear);
    this.table = el("div", { class: "panel" });
    this.previewBox = el("div", {});
    put(this.root, this.head, this.bar, this.table, this.previewBox);
  }
  draw() {
    if (!this.bar) this.layout();
    const d = this.data;
    put(this.head,
      el("div", { class: "crumbs" }, el("a", { href: "#/dead-letters", text: "Dead letters" }), " / ", d.queue),
      el("h1", {}, "Dead letters on ", el("a", { href: hashFor("queue", d.queue), text: d.queue })),
      el("p", { class: "sub", text: fmt.int(d.total) + " messages" + (d.grouped < d.total ? ` · the first ${fmt.int(d.grouped)} are grouped` : "") + " · grouped by the queue they failed on, why they died, and the last failure" }));
    put(this.table, d.groups.length
      ? el("table", { id: "groups" },
        el("thead", {}, el("tr", {}, el("th", {}), el("th", { class: "num", text: "Count" }), el("th", { text: "Failed on" }), el("th", { text: "Reason" }), el("th", { text: "Last failure" }), el("th", { text: "First seen" }), el("th", { text: "Last seen" }))),
        el("tbody", {}, d.groups.map((g) => this.groupRows(g)).flat()))
      : el("div", { class: "empty", text: "No dead letters here." }));
    put(this.previewBox, this.previewPanel());
    this.drawBar();
    drawn("dead-letters");
  }
  groupRows(g) {
    const key = this.key(g);
    const all = g.message_ids.every((id) => this.selected.has(id));
    const some = g.message_ids.some((id) => this.selected.has(id));
    const box = el("input", { type: "checkbox", class: "group-check", "aria-label": `select the ${g.count} messages of the group`, onclick: (e) => {
      e.stopPropagation();
      for (const id of g.message_ids) (box.checked ? this.selected.add(id) : this.selected.delete(id));
      this.draw();
    } });
    box.checked = all;
    box.indeterminate = some && !all;
    const open = this.expanded.has(key);
    const row = toggleRow({ class: "group" + (all ? " selected" : ""), "data-queue": g.orig_queue || "" }, "g:" + key, open, () => {
      open ? this.expanded.delete(key) : this.expanded.add(key);
      this.draw();
      document.querySelector(`[data-focus="${CSS.escape("g:" + key)}"]`)?.focus();
    });
    row.append(
      el("td", {}, box),
      el("td", { class: "num" }, el("span", { class: "count-pill", text: fmt.int(g.count) })),
      el("td", {}, g.orig_queue ? queueLink(g.orig_queue) : el("span", { class: "muted", text: "unknown" }),
        g.orig_address && g.orig_address !== g.orig_queue ? el("div", { class: "muted", text: "address " + g.orig_address }) : null,
        g.orig_address ? el("div", {}, el("a", { class: "policy-link", href: hashFor("redelivery", g.orig_address), title: "the redelivery policy these messages went through", text: "policy" })) : null),
      el("td", { class: "group-reason" }, g.reason || "—", example(g.reason, g.example_reason)),
      el("td", { class: "group-failure" }, g.last_failure || "—", example(g.last_failure, g.example_failure)),
      el("td", { class: "nowrap muted", title: fmt.time(g.first_seen_ms), text: fmt.ago(g.first_seen_ms) }),
      el("td", { class: "nowrap", title: fmt.time(g.last_seen_ms), text: fmt.ago(g.last_seen_ms) }));
    const rows = [row];
    if (open) {
      rows.push(el("tr", { class: "detail" }, el("td", {}), el("td", { colspan: 6 }, this.groupMessages(g))));
    }
    return rows;
  }
  groupMessages(g) {
    const items = g.message_ids.slice(0, 200).map((id) => {
      const box = el("input", { type: "checkbox", class: "message-check", "data-id": id, onclick: () => { box.checked ? this.selected.add(id) : this.selected.delete(id); this.draw(); } });
      box.checked = this.selected.has(id);
      const detail = this.details.get(id);
      return el("div", { class: "dl-message" },
        el("label", {}, box, " message ", el("span", { class: "mono", text: id })), " ",
        el("a", { href: "#", class: "open-message", onclick: async (e) => {
          e.preventDefault();
          if (detail) this.details.delete(id);
          else {
            try { this.details.set(id, await api(`/api/queues/${encodeURIComponent(this.name)}/messages/${id}`)); } catch (err) { toast(err.message, true); }
          }
          this.draw();
        }, text: detail ? "hide" : "failure history" }),
        detail ? el("div", { class: "panel" }, messageDetail(detail, this.name)) : null);
    });
    if (g.message_ids.length > 200) items.push(el("div", { class: "muted", text: "… and " + (g.message_ids.length - 200) + " more (select the group to act on all)" }));
    return el("div", {}, items);
  }
  drawBar() {
    const none = !this.selection();
    this.selText.textContent = this.describeSelection();
    for (const kind of ["retry", "move", "remove"]) this.buttons[kind].disabled = none;
    this.buttons.clear.hidden = !this.selected.size;
  }
  async dryRun(kind) {
    const sel = this.selection();
    if (!sel) return;
    const body = { ...sel, dry_run: true };
    if (kind === "move") {
      body.to_address = this.toInput.value.trim();
      if (!body.to_address) return toast("Type the address to move to first.", true);
    }
    try {
      const answer = await api(`/api/queues/${encodeURIComponent(this.name)}/${kind}`, body);
      this.preview = { kind, body, answer };
      this.draw();
      document.getElementById("preview").scrollIntoView({ block: "nearest" });
    } catch (e) {
      toast(e.message, true);
    }
  }
  previewPanel() {
    const p = this.preview;
    if (!p) return null;
    const cancel = el("button", { id: "cancel", onclick: () => { this.preview = null; tick(); }, text: "Cancel" });
    if (p.kind === "retry") {
      const going = p.answer.outcomes.filter((o) => !o.skipped);
      const rows = p.answer.outcomes.slice(0, 500).map((o) => el("tr", { class: o.skipped ? "skipped" : "going", "data-id": o.id },
        el("td", { class: "mono", text: o.id }),
        o.skipped
          ? el("td", { class: "skip", text: "stays: " + o.skipped })
          : el("td", {}, el("span", { class: "arrow", text: "→" }), el("span", { class: "mono", text: o.to_queue }), el("span", { class: "muted", text: o.to_address !== o.to_queue ? "  on " + o.to_address : "" }))));
      return el("div", { class: "panel preview", id: "preview" },
        el("h2", { text: `Retry preview: ${going.length} message${going.length === 1 ? "" : "s"} go back, ${p.answer.skipped} stay` }),
        el("p", { class: "muted", text: "Nothing has moved yet. Each message goes back to exactly the queue it failed on, one commit per message; confirming retries exactly the messages listed as going back." + (p.answer.more ? " The preview lists the first " + going.length + " only." : "") }),
        el("table", { id: "preview-table" },
          el("thead", {}, el("tr", {}, el("th", { class: "id-col", text: "Message" }), el("th", { text: "Goes back to" }))),
          el("tbody", {}, rows)),
        p.answer.outcomes.length > 500 ? el("p", { class: "muted", text: "… " + (p.answer.outcomes.length - 500) + " more" }) : null,
        el("div", { class: "toolbar" }, el("span", { class: "grow" }), cancel,
          el("button", { class: "primary", id: "confirm", disabled: !going.length, onclick: () => this.confirm({ ids: going.map((o) => o.id) }), text: `Confirm retry of ${going.length}` })));
    }
    const verb = p.kind === "move" ? "Move" : "Remove";
    return el("div", { class: "panel preview" + (p.kind === "remove" ? " removal" : ""), id: "preview" },
      el("h2", { text: `${verb} ${p.answer.count} message${p.answer.count === 1 ? "" : "s"}` + (p.kind === "move" ? " to " + p.body.to_address : "") + "?" }),
      selectionList(p.body),
      el("p", { class: "muted", text: p.kind === "remove" ? "Removed messages are gone for good." : "Each message moves in one commit; messages being delivered stay." }),
      el("div", { class: "toolbar" }, el("span", { class: "grow" }), cancel,
        el("button", { class: p.kind === "remove" ? "danger solid" : "primary", id: "confirm", disabled: !p.answer.count, onclick: () => this.confirm({ ...p.body, dry_run: false }), text: `Confirm ${verb.toLowerCase()}` })));
  }
  async confirm(body) {
    const kind = this.preview.kind;
    try {
      const answer = await api(`/api/queues/${encodeURIComponent(this.name)}/${kind}`, { ...body, dry_run: false });
      const done = kind === "retry" ? `${answer.moved} retried` + (answer.skipped ? `, ${answer.skipped} stayed` : "") : kind === "move" ? `${answer.moved} moved` : `${answer.removed} removed`;
      toast(done);
      this.selected.clear();
      this.preview = null;
      tick();
    } catch (e) {
      toast(e.message, true);
    }
  }
}

// ---------- redelivery explainer ----------

class Redelivery {
  constructor(root, address) {
    this.root = root;
    this.address = address;
    let typing;
    this.input = el("input", { type: "text", id: "address", list: "addresses", "aria-label": "Address", placeholder: "address, e.g. orders", value: address || "", oninput: () => {
      clearTimeout(typing);
      typing = setTimeout(() => this.suggest().catch((e) => this.fail(e)), 200);
    } });
    this.list = el("datalist", { id: "addresses" });
    this.out = el("div", {});
    const go = (e) => { e.preventDefault(); location.hash = hashFor("redelivery", this.input.value.trim()); };
    root.append(el("h1", { text: "Redelivery explainer" }),
      el("p", { class: "sub", text: "What happens to a message of an address that keeps failing: the effective address-settings as a schedule, from the same rules the broker applies." }),
      el("form", { class: "toolbar", onsubmit: go }, this.input, this.list, el("button", { class: "primary", type: "submit", text: "Explain" })),
      this.out);
  }
  fail(e) { put(this.out, el("div", { class: "error-box", text: e.message })); }
  // Offers the addresses that contain what is typed (the first ones by name).
  async suggest() {
    this.suggested = true;
    const query = new URLSearchParams({ filter: this.input.value.trim(), sort: "address", limit: 100 });
    const queues = (await api("/api/queues?" + query)).queues;
    put(this.list, [...new Set(queues.map((q) => q.address))].map((a) => el("option", { value: a })));
  }
  async refresh() {
    if (!this.suggested) await this.suggest();
    if (!this.address) return;
    if (this.drawn) return; // a plan changes only with the config
    const r = await api(`/api/addresses/${encodeURIComponent(this.address)}/redelivery`);
    this.drawn = true;
    const plan = r.plan;
    const maxAt = Math.max(1, ...plan.deliveries.map((d) => d.at_ms[1]));
    const rows = plan.deliveries.map((d) => el("tr", {},
      el("td", { class: "num", text: "#" + d.number }),
      el("td", { class: "nowrap", text: d.number === 1 ? "at once" : "after " + fmt.range(d.delay_ms) }),
      el("td", { class: "nowrap muted", text: d.number === 1 ? "0" : "+" + fmt.range(d.at_ms) }),
      el("td", { class: "bar-cell" }, el("div", { class: "bar" + (d.at_ms[0] !== d.at_ms[1] ? " jitter" : ""), style: undefined, "data-w": d.at_ms[1] / maxAt }))));
    const end = plan.end;
    let endText, endClass = "end";
    if (end.kind === "dead-letter") {
      if (end.address) endText = `After failure #${end.after}: dead-lettered to address ${end.address}` + (end.queue ? `, queue ${end.queue} (auto-created)` : "");
      else { endText = `After failure #${end.after}: dropped — no dead-letter-address is set`; endClass += " drop"; }
    } else if (end.kind === "move") endText = `After failure #${end.after}: moved to ${end.address} by the redelivery-schedule`;
    else if (end.kind === "delete") endText = `After failure #${end.after}: deleted by the redelivery-schedule`;
    else { endText = "Unlimited attempts: never dead-lettered — it is redelivered for ever"; endClass += " never"; }
    const total = plan.total_ms ? fmt.range(plan.total_ms) : null;
    const sentence = end.kind === "never"
      ? "A failing message keeps coming back; the first " + plan.deliveries.length + " deliveries are shown."
      : `A message that keeps failing is delivered ${fmt.int(end.after)} time${end.after === 1 ? "" : "s"}` + (total ? ` over ${total} (plus the time consumers take)` : "") + ".";
    put(this.out, 
      el("div", { class: "panel" },
        el("h2", {}, "Address ", el("span", { class: "mono", text: r.address })),
        el("p", { class: "sentence", id: "plan-sentence", text: sentence }),
        plan.jitter_factor > 0 ? el("p", { class: "muted", text: `Delays vary by ±${Math.round(plan.jitter_factor * 100)} % (redelivery-collision-avoidance-factor), then are capped; ranges show the least and the most.` }) : null,
        el("table", { class: "timeline", id: "plan" },
          el("thead", {}, el("tr", {}, el("th", { class: "num", text: "Delivery" }), el("th", { text: "Delay" }), el("th", { text: "Since the first" }), el("th", {}))),
          el("tbody", {}, rows)),
        plan.more ? el("p", { class: "muted", text: `… ${fmt.int(plan.more)} more deliveries` }) : null,
        el("div", { class: endClass, id: "plan-end", text: endText }),
        el("p", { class: "muted", text: "A consumer's own retry-after replaces these delays (capped by max-retry-after). Retried dead letters come back at most max-redrive times." })),
      el("div", { class: "panel" }, el("h2", { text: "The settings behind it" }), settingsTable(r.settings)));
    for (const bar of this.out.querySelectorAll(".bar")) bar.style.width = (Number(bar.getAttribute("data-w")) * 100).toFixed(1) + "%";
    drawn("redelivery");
  }
}
