// The compliance console: reads /compliance/api/* (the page's cookie carries the token)
// and writes every value with textContent, never as HTML.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const form = $("filters");
  let stack = [];      // the `after` cursor of each page shown before this one
  let current = null;  // this page's cursor (null: the first page)
  let next = null;
  // The ledger's verdict, the kept-head check and when the verification scan is due:
  // asked once per page load; the list waits for it to say when "not yet" ends.
  const ledgerInfo = get("/compliance/api/ledger");

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function query(extra) {
    const params = new URLSearchParams();
    for (const [key, value] of new FormData(form)) {
      if (value && key !== "limit") params.set(key, value);
    }
    for (const [key, value] of Object.entries(extra || {})) {
      if (value !== null && value !== undefined) params.set(key, value);
    }
    return params;
  }
  async function get(url) {
    const response = await fetch(url, {credentials: "same-origin", cache: "no-store"});
    if (!response.ok) throw new Error(url.split("?")[0] + ": " + response.status);
    return response.json();
  }
  function when(text) { return text ? text.replace("T", " ").slice(0, 19) : ""; }
  // A request's file verification: the scan's verdict, or when it will come, as
  // [text, class, explanation] (the explanation is the cell's tooltip).
  function verified(r, scan) {
    if (r.verified === "ok") return ["yes", "ok", ""];
    if (r.verified === "failed") return ["FAILED", "bad", "the scan found residue"];
    if (r.verified === "not_scheduled") {
      return ["no scan", "muted", "nothing readable was erased: no fingerprints, no scan"];
    }
    if (r.status !== "completed") {
      return ["not yet: after completion", "muted", "the files are scanned once the request completes"];
    }
    if (!scan) return ["not yet", "muted", "scanned at the next verification-scan run"];
    if (!scan.next_run) {
      return ["not yet: not scheduled", "muted", "no scheduler runs the verification-scan " +
        "job: start `memory-ledger jobs run` (it runs every " + scan.every_minutes + " min)"];
    }
    const at = when(scan.next_run) + " UTC", hhmm = at.slice(11);
    if (Date.parse(scan.next_run) < Date.now()) {
      return ["not yet: late since " + hhmm, "bad", "the verification-scan job was due at " + at +
        " and has not run: is `memory-ledger jobs run` running?"];
    }
    return ["not yet: due " + hhmm, "muted", "the verification-scan job's next run: " + at];
  }
  async function scanSchedule() {
    try { return (await ledgerInfo).scan; } catch (error) { return null; }
  }
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    if (seconds < 120) return seconds.toFixed(1) + " s";
    if (seconds < 7200) return (seconds / 60).toFixed(1) + " min";
    if (seconds < 172800) return (seconds / 3600).toFixed(1) + " h";
    return (seconds / 86400).toFixed(1) + " days";
  }
  function card(title, body) {
    const box = el("div", null, "card");
    box.append(el("h3", title), body);
    return box;
  }
  function counts(map) {
    const list = el("ul");
    for (const [key, n] of Object.entries(map).sort((a, b) => b[1] - a[1])) {
      list.append(el("li", key + ": " + n));
    }
    if (!list.children.length) list.append(el("li", "none"));
    return list;
  }

  async function loadTotals() {
    const t = await get("/compliance/api/totals?" + query());
    const box = $("totals");
    box.replaceChildren(
      card("Requests", el("p", t.total, "big")),
      card("By status", counts(t.by_status)),
      card("By basis", counts(t.by_basis)),
      card("By scope", counts(t.by_kind)),
      card("Overdue (> " + t.deadline_days + " days, still open)",
           el("p", t.overdue, "big " + (t.overdue ? "bad" : "ok"))),
      card("Time to completion", el("p", "median " + duration(t.completion_seconds.median) +
           ", p90 " + duration(t.completion_seconds.p90) + " (" + t.completion_seconds.count +
           " completed)")));
  }

  async function loadPage() {
    const limit = form.elements.limit.value;
    const page = await get("/compliance/api/requests?" + query({after: current, limit}));
    const scan = await scanSchedule();
    next = page.next;
    const body = $("list").tBodies[0];
    body.replaceChildren();
    for (const r of page.requests) {
      const row = el("tr");
      const link = el("a", r.request_id, "rid");
      link.href = "#" + r.request_id;
      link.addEventListener("click", (event) => { event.preventDefault(); openDetail(r.request_id); });
      const idCell = el("td");
      idCell.append(link);
      const good = r.status === "completed";
      const bad = ["partial", "blocked", "refused"].includes(r.status);
      const [seen, seenClass, seenWhy] = verified(r, scan);
      row.append(idCell, el("td", r.namespace), el("td", r.basis), el("td", r.kind),
        el("td", when(r.filed_at)), el("td", when(r.completed_at)),
        el("td", r.status, good ? "ok" : bad ? "bad" : ""),
        el("td", r.stores_ok + "/" + r.stores_total, r.stores_ok < r.stores_total ? "bad" : ""),
        el("td", seen, seenClass));
      row.lastChild.title = seenWhy;
      body.append(row);
    }
    if (!page.requests.length) {
      const row = el("tr");
      const cell = el("td", "no request matches", "muted");
      cell.colSpan = 9;
      row.append(cell);
      body.append(row);
    }
    $("pageinfo").textContent = "page " + (stack.length + 1) + " (" + page.requests.length + " rows)";
    $("prev").disabled = !stack.length;
    $("first").disabled = !stack.length;
    $("next").disabled = next === null;
    $("csv").href = "/compliance/api/requests.csv?" + query();
  }

  async function openDetail(id) {
    const d = await get("/compliance/api/requests/" + encodeURIComponent(id));
    const r = d.request;
    const scan = await scanSchedule();
    $("detail-id").textContent = r.request_id;
    $("detail-summary").textContent = r.namespace + " · basis " + r.basis + " · scope " + r.kind +
      " · status " + r.status + " · " + r.targets + " item(s) · stores " + r.stores_ok + "/" +
      r.stores_total + " ok · key proof " + (r.key_proof || "–") + " · file scan " +
      verified(r, scan).filter((part, i) => i !== 1 && part).join(": ") + " · filed " + when(r.filed_at) +
      (r.completed_at ? " · completed " + when(r.completed_at) + " (" + duration(r.done_seconds) + ")" : "");
    $("pack").href = d.pack_download;
    $("pack-url").textContent = d.pack_url;
    const waiting = $("waiting");
    waiting.replaceChildren();
    for (const w of d.waiting_for) {
      waiting.append(el("p", "waiting for subscriber " + w.subscriber + " (deadline " + when(w.deadline) +
        (w.overdue ? ", OVERDUE)" : ")"), w.overdue ? "bad" : ""));
    }
    const body = $("timeline").tBodies[0];
    body.replaceChildren();
    for (const s of d.timeline) {
      const row = el("tr");
      row.append(el("td", s.seq), el("td", when(s.at)), el("td", s.phase),
        el("td", s.line, s.ok === false ? "bad" : s.ok ? "ok" : ""),
        el("td", s.entry_hash.slice(0, 16) + "…"));
      row.lastChild.title = s.entry_hash;
      body.append(row);
    }
    $("detail").hidden = false;
    $("detail").scrollIntoView();
    if (location.hash !== "#" + id) history.replaceState(null, "", "#" + id);
  }

  async function loadIntegrity() {
    try {
      const v = await ledgerInfo;
      const p = $("ledger");
      p.replaceChildren(el("b", v.ok ? "intact" : "BROKEN", v.ok ? "ok" : "bad"),
        el("span", " (" + v.explanation + "). Anchor: "), el("code", v.anchor));
      showBanner(v);
    } catch (error) { $("ledger").textContent = "could not be checked: " + error.message; }
    try {
      const h = await get("/compliance/api/head");
      const p = $("head");
      if (!h.available) { p.textContent = "not available (no answer from /v1/audit/head)"; return; }
      showHead(h.head);
    } catch (error) { $("head").textContent = "not available"; }
  }
  // A broken chain, or a ledger that no longer extends the last head kept (rolled back
  // or rewritten): said at the top of the page, not only in its card.
  function showBanner(v) {
    const problems = [];
    if (!v.ok) problems.push("The lifecycle ledger's hash chain does not verify (" + v.explanation + ").");
    if (v.kept_head && !v.kept_head.ok) {
      problems.push("The ledger does not extend the last signed head the audit-head job kept: " +
        "it was rolled back or rewritten (" + v.kept_head.explanation + "). No new head is " +
        "kept until this is resolved; run `memory-ledger doctor`.");
    }
    const banner = $("banner");
    banner.textContent = problems.join(" ");
    banner.hidden = !problems.length;
  }
  // The head as indented JSON that wraps in its card, and a button that copies it exactly.
  function showHead(head) {
    const text = JSON.stringify(head, null, 2);
    $("head").textContent = "record this (keep it outside this server):";
    const pre = $("head-json");
    pre.textContent = text;
    pre.hidden = false;
    const copy = $("copy-head");
    copy.hidden = false;
    copy.onclick = async () => {
      try {
        await navigator.clipboard.writeText(text);
        $("copied").textContent = "copied";
      } catch (error) {  // no clipboard (an http page on another host): select it instead
        const range = document.createRange();
        range.selectNodeContents(pre);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        $("copied").textContent = "selected: press Ctrl+C to copy";
      }
    };
  }

  function reload() {
    stack = []; current = null;
    return Promise.all([loadPage(), loadTotals()]).catch(showError);
  }
  function showError(error) { $("pageinfo").textContent = "error: " + error.message; }

  form.addEventListener("submit", (event) => { event.preventDefault(); reload(); });
  form.addEventListener("reset", () => setTimeout(reload, 0));
  $("next").addEventListener("click", () => {
    if (next === null) return;
    stack.push(current); current = next; loadPage().catch(showError);
  });
  $("prev").addEventListener("click", () => {
    if (!stack.length) return;
    current = stack.pop(); loadPage().catch(showError);
  });
  $("first").addEventListener("click", () => { stack = []; current = null; loadPage().catch(showError); });
  $("close").addEventListener("click", () => { $("detail").hidden = true; history.replaceState(null, "", "#"); });
  reload().then(() => {
    const id = location.hash.slice(1);
    if (id) openDetail(id).catch(showError);
  });
  loadIntegrity();
})();
