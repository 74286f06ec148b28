// The approvals page: lists the calls that wait for a person (GET
// /approvals as JSON) and sends the person's decisions (POST
// /approvals/{id}), both with the approver's key as a bearer token. The
// key is kept in this tab's sessionStorage only, under a name of its own:
// the /docs page of the same tab does not pick it up and make its tool
// calls as the approver. Everything shown comes from the service and is
// set as text (textContent), never parsed as HTML.
"use strict";
(function () {
  const keyName = "toolsvc-approver-key";
  // How often the list is read again while the tab is visible.
  const refreshMillis = 5000;

  const $ = (id) => document.getElementById(id);
  const key = () => sessionStorage.getItem(keyName) || "";
  const headers = (extra) => {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    const k = key();
    if (k) h.Authorization = "Bearer " + k;
    return h;
  };

  // el makes an element with its text, and its children.
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (name === "text") e.textContent = value;
      else if (name === "dataset") Object.assign(e.dataset, value);
      else e[name] = value;
    }
    for (const c of children) if (c) e.appendChild(c);
    return e;
  }

  // problem reads the service's error body ({"error": {"code",
  // "message"}}) into one line for the person.
  async function problem(resp) {
    let text = "";
    try {
      const body = await resp.json();
      if (body && body.error && body.error.message) text = body.error.message + " (" + resp.status + ", " + body.error.code + ")";
    } catch (e) { /* not JSON: the status says enough */ }
    return text || "HTTP " + resp.status;
  }

  function showError(text) {
    const box = $("error");
    box.textContent = text;
    box.hidden = !text;
  }

  function showKeyState() {
    $("key-state").textContent = key() ? "a key is set for this tab" : "no key given";
  }

  // when shows a time as the person's local time, how far away it is, and
  // the exact instant in its title.
  function when(iso) {
    const t = new Date(iso);
    if (isNaN(t)) return el("span", { text: String(iso) });
    const mins = Math.round((t.getTime() - Date.now()) / 60000);
    const rel = mins === 0 ? "now" : mins > 0 ? "in " + mins + " min" : Math.abs(mins) + " min ago";
    return el("time", { text: t.toLocaleString() + " (" + rel + ")", dateTime: iso, title: iso });
  }

  // facts builds the part of an entry that describes the held call; it is
  // rebuilt on each refresh (times move on), while the entry's reason and
  // buttons are kept.
  function facts(a) {
    const dl = el("dl", { className: "facts" });
    const row = (name, value) => {
      if (value === undefined || value === null || value === "") return;
      dl.appendChild(el("dt", { text: name }));
      dl.appendChild(el("dd", {}, typeof value === "string" ? el("span", { text: value }) : value));
    };
    row("Key", a.key || "(no key: the service has none)");
    row("Created", a.created_at && when(a.created_at));
    row("Expires", a.expires_at && when(a.expires_at));
    row("Session", a.session_id);
    row("Workspace", a.workspace);
    row("Call ID", a.call_id);
    row("Approval ID", a.approval_id);
    row("Arguments SHA-256", a.arguments_sha256);
    let args = "";
    try { args = JSON.stringify(a.arguments === undefined ? {} : a.arguments, null, 2); } catch (e) { args = String(a.arguments); }
    return el("div", { className: "about" },
      el("h2", { className: "title", text: a.tool + " — a call by " + (a.key || "(no key)") }),
      el("p", { className: "summary", text: a.summary || "(the tool says nothing of what the call does: read the arguments)" }),
      dl,
      el("div", { className: "arguments-label", text: "Arguments (long strings cut, secrets redacted):" }),
      el("pre", { className: "arguments", text: args }));
  }

  // entry builds one waiting call with its reason and buttons.
  function entry(a) {
    const reason = el("input", { className: "reason", type: "text", maxLength: 2000, placeholder: "Reason (optional; a rejection's reason reaches the model)" });
    reason.setAttribute("aria-label", "Reason for " + a.approval_id);
    const approve = el("button", { className: "approve", type: "button", text: "Approve" });
    const reject = el("button", { className: "reject", type: "button", text: "Reject" });
    const outcome = el("p", { className: "outcome error", hidden: true });
    outcome.setAttribute("role", "alert");
    const li = el("li", { className: "approval", dataset: { approvalId: a.approval_id } },
      facts(a), el("div", { className: "decide" }, reason, approve, reject), outcome);
    approve.addEventListener("click", () => decide(li, a, "approve", reason.value));
    reject.addEventListener("click", () => decide(li, a, "reject", reason.value));
    return li;
  }

  // decide sends a decision; the entry leaves the list once it is taken,
  // and shows the service's refusal (a key that may not decide, its own
  // call, one already decided) when it is not.
  async function decide(li, a, decision, reason) {
    const buttons = li.querySelectorAll("button");
    const outcome = li.querySelector(".outcome");
    buttons.forEach((b) => { b.disabled = true; });
    outcome.hidden = true;
    try {
      const resp = await fetch("/approvals/" + encodeURIComponent(a.approval_id), {
        method: "POST",
        headers: headers({ "Content-Type": "application/json" }),
        body: JSON.stringify({ decision: decision, reason: reason.trim() }),
        credentials: "omit",
        cache: "no-store",
      });
      if (!resp.ok) {
        outcome.textContent = "Not " + (decision === "approve" ? "approved" : "rejected") + ": " + (await problem(resp));
        outcome.hidden = false;
        return;
      }
      const done = await resp.json();
      li.remove();
      const text = (done.status || decision) + ": " + done.tool + " — a call by " + (done.key || "(no key)") + " — " +
        (done.summary || done.approval_id) + (done.reason ? " — reason: " + done.reason : "");
      $("decided").prepend(el("li", { className: "decision", dataset: { approvalId: done.approval_id }, text: text }));
      $("decided-box").hidden = false;
      load();
    } catch (e) {
      outcome.textContent = "The decision was not sent: " + e.message;
      outcome.hidden = false;
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  let loading = false;
  // load reads the waiting calls and brings the list up to date: new
  // calls are added, gone ones removed, and the ones still waiting keep
  // what the person has typed.
  async function load() {
    if (loading) return;
    loading = true;
    try {
      const resp = await fetch("/approvals", { headers: headers(), credentials: "omit", cache: "no-store" });
      if (!resp.ok) {
        let text = await problem(resp);
        if (resp.status === 401) text = "Give an approver's key above. " + text;
        showError(text);
        $("list").textContent = "";
        $("state").textContent = "";
        return;
      }
      const body = await resp.json();
      showError("");
      render(Array.isArray(body.approvals) ? body.approvals : []);
    } catch (e) {
      showError("The list could not be read: " + e.message);
    } finally {
      loading = false;
    }
  }

  function render(approvals) {
    const list = $("list");
    const have = new Map();
    for (const li of list.children) have.set(li.dataset.approvalId, li);
    const want = new Set(approvals.map((a) => a.approval_id));
    for (const [id, li] of have) if (!want.has(id)) li.remove();
    // In the service's order, oldest first. An entry already in its place
    // is not moved: moving it would take the focus from its reason while
    // the person types.
    let cursor = list.firstElementChild;
    for (const a of approvals) {
      let li = have.get(a.approval_id);
      if (li) li.replaceChild(facts(a), li.querySelector(".about"));
      else li = entry(a);
      if (li === cursor) cursor = cursor.nextElementSibling;
      else list.insertBefore(li, cursor);
    }
    $("state").textContent = (approvals.length === 0 ? "Nothing waits." : approvals.length + (approvals.length === 1 ? " call waits." : " calls wait.")) +
      " Read at " + new Date().toLocaleTimeString() + "; read again every " + refreshMillis / 1000 + " s.";
  }

  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("key");
    const k = input.value.trim();
    if (k) sessionStorage.setItem(keyName, k);
    else sessionStorage.removeItem(keyName);
    input.value = "";
    showKeyState();
    $("list").textContent = "";
    load();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(keyName);
    showKeyState();
    $("list").textContent = "";
    load();
  });
  $("refresh").addEventListener("click", load);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) load(); });
  setInterval(() => { if (!document.hidden) load(); }, refreshMillis);
  showKeyState();
  load();
})();
