// clawkit panel: a key in sessionStorage, the JSON API with a Bearer header, DOM built with
// textContent only (data never becomes markup), live updates read from SSE over fetch.
"use strict";

const KEY = "clawkit.key";
const main = () => document.getElementById("main");
let live = null; // the AbortController of the current live stream
let me = { can: {} }; // the signed-in key: name, role and what it may do (controls follow it)
let poll = null; // the timer refreshing a session that is running or waiting

function el(tag, attrs = {}, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "on") for (const [ev, fn] of Object.entries(v)) n.addEventListener(ev, fn);
    else if (k === "style") Object.assign(n.style, v); // CSSOM, which the CSP allows (a style attribute it does not)
    else if (v !== undefined && v !== null) n.setAttribute(k, v);
  }
  for (const kid of kids.flat(Infinity)) if (kid !== null && kid !== undefined) n.append(kid instanceof Node ? kid : String(kid));
  return n;
}

const when = (ts) => (ts ? new Date(ts * 1000).toLocaleString() : "-");
const json = (v) => JSON.stringify(v, null, 2);
function ago(ts) {
  if (!ts) return "-";
  const s = Math.max(0, Date.now() / 1000 - ts);
  return s < 60 ? Math.round(s) + " s ago" : s < 3600 ? Math.round(s / 60) + " min ago" : s < 86400 ? Math.round(s / 3600) + " h ago" : when(ts);
}
const STATUS = { waiting: ["waiting for approval", "warn"], running: ["running", "warn"], idle: ["idle", ""], failed: ["failed", "bad"], done: ["done", "ok"] };
const statusBadge = (st, attrs = {}) => el("span", { class: "badge status " + (STATUS[st] || ["", ""])[1], "data-status": st, ...attrs }, (STATUS[st] || [st])[0]);

async function api(path, opts = {}) {
  const headers = { Authorization: "Bearer " + sessionStorage.getItem(KEY), ...(opts.headers || {}) };
  if (opts.body) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { ...opts, headers });
  if (r.status === 401 && !opts.signingIn) { signOut(); throw new Error("signed out: the key was refused"); }
  const data = r.headers.get("content-type")?.includes("json") ? await r.json() : null;
  if (!r.ok) throw new Error((data && data.error && data.error.message) || r.statusText);
  return data;
}

// Read an SSE response from fetch (EventSource cannot send an Authorization header).
async function stream(path, opts, onEvent) {
  stopLive();
  live = new AbortController();
  const headers = { Authorization: "Bearer " + sessionStorage.getItem(KEY) };
  if (opts.body) headers["Content-Type"] = "application/json";
  try {
    const r = await fetch(path, { ...opts, headers, signal: live.signal });
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i); buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) onEvent(JSON.parse(data));
      }
    }
  } catch (e) { if (e.name !== "AbortError") console.warn(e); }
}

function stopLive() { if (live) { live.abort(); live = null; } if (poll) { clearTimeout(poll); poll = null; } }

function signOut() {
  sessionStorage.removeItem(KEY);
  stopLive();
  location.hash = "#/signin";
  render();
}

function showError(e) { main().prepend(el("p", { class: "error", role: "alert" }, e.message || String(e))); }

// --- views -----------------------------------------------------------------------------

function signinView() {
  document.getElementById("nav").hidden = true;
  const input = el("input", { id: "key", type: "password", placeholder: "ck_…", size: 60, autocomplete: "off" });
  const msg = el("p", { class: "error", id: "signin-error" });
  const form = el("form", { id: "signin", class: "card", on: { submit: async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    try { await api("/api/panel/me", { signingIn: true }); location.hash = "#/sessions"; render(); }
    catch (e) { sessionStorage.removeItem(KEY); msg.textContent = "Sign-in failed: " + e.message; }
  } } }, el("h2", {}, "Sign in"), el("p", {}, "Paste an API key (clawkit keys create). It stays in this tab only."),
    input, " ", el("button", { type: "submit", id: "signin-button" }, "Sign in"), msg);
  main().replaceChildren(form);
}


async function sessionsView() {
  const [{ agents }, { sessions }] = await Promise.all([api("/api/agents"), api("/api/panel/sessions?limit=100")]);
  const kids = [el("h2", {}, "Sessions")];
  if (me.can.run) {
    const agentSel = el("select", { id: "agent", "aria-label": "agent" }, agents.map((a) => el("option", { value: a.name }, a.name)));
    const text = el("input", { id: "message", placeholder: "message to the agent", "aria-label": "message" });
    kids.push(el("form", { class: "row", id: "new-turn", on: { submit: async (ev) => {
      ev.preventDefault();
      try {
        const s = await api("/api/sessions", { method: "POST", body: JSON.stringify({ agent: agentSel.value }) });
        sessionStorage.setItem("clawkit.send", text.value);
        location.hash = "#/session/" + s.session_id;
      } catch (e) { showError(e); }
    } } }, agentSel, text, el("button", { type: "submit" }, "Send")));
  }
  const rows = sessions.map((s) => el("li", { class: "session-row", "data-id": s.id, "data-status": s.status },
    el("a", { href: "#/session/" + s.id, class: "session-link", title: s.id }, s.title || s.id),
    s.label ? el("span", { class: "badge label" }, s.label) : null,
    el("div", { class: "session-meta" }, statusBadge(s.status), " ", el("span", { class: "agent" }, s.agent),
      " · ", el("span", { title: when(s.last_activity) }, ago(s.last_activity)),
      " · ", el("span", { class: "tokens" }, (s.tokens || 0).toLocaleString("en") + " tokens"),
      " · ", el("span", { class: "cost" }, s.cost == null ? "cost unknown" : "$" + s.cost.toFixed(4)))));
  kids.push(el("ul", { id: "sessions" }, rows.length ? rows : el("li", {}, "No sessions yet.")));
  main().replaceChildren(...kids);
}

function toolMessage(m, tools) {
  const out = tools[m.tool_result?.call_id] || { output: m.content, untrusted: false };
  return el("div", { class: "msg tool" + (out.untrusted ? " untrusted" : "") },
    el("div", { class: "role" }, "tool ", el("strong", {}, m.tool_result?.name || ""), " ", out.untrusted ? untrustedBadge(out) : null,
      out.is_error ? el("span", { class: "badge bad" }, "error") : null),
    el("pre", { class: "tool-output" }, out.output));
}

function messageNode(m, tools) {
  if (m.role === "tool") return toolMessage(m, tools);
  const kids = [el("div", { class: "role" }, m.role)];
  if (m.content) kids.push(el("pre", {}, m.content));
  for (const c of m.tool_calls || []) kids.push(el("div", { class: "tool-call" }, "→ ", el("strong", {}, c.name), " ", el("code", {}, JSON.stringify(c.arguments))));
  return el("div", { class: "msg " + m.role }, kids);
}

async function sessionView(id) {
  stopLive();
  const path = "/api/sessions/" + encodeURIComponent(id);
  const liveBox = el("pre", { id: "live" });
  const liveSection = el("section", { id: "live-section", hidden: "" }, el("h3", {}, "Live"), liveBox); // shown once text streams
  const parts = { facts: el("div"), approvals: el("div", { id: "session-approvals" }), timeline: el("div", { id: "timeline" }), transcript: el("div", { id: "transcript" }) };
  let sending = false, finished = false;
  const title = el("span", { id: "session-title" });

  const refresh = async () => {
    const [t, tl] = await Promise.all([api(path), api(path + "/timeline")]);
    let st = tl.status;
    if (sending && st === "idle") st = "running";
    if (finished && st === "idle") st = "done";
    const u = t.usage || {};
    title.textContent = tl.turns[0]?.title || t.messages.find((m) => m.role === "user")?.content || id;
    parts.facts.replaceWith(parts.facts = el("div", { class: "card", id: "facts" },
      el("div", {}, "agent ", el("strong", {}, t.agent), " · ", statusBadge(st, { id: "turn-status" }), " · ", el("code", { title: "session id" }, id)),
      el("div", { id: "classification" }, "classification: ", t.classification ? `${t.classification.label || "-"} [${(t.classification.tags || []).join(", ")}]` : "—"),
      t.plan ? el("details", { id: "plan" }, el("summary", {}, "plan"), el("pre", {}, json(t.plan))) : null,
      el("div", { id: "usage" }, `${u.calls || 0} model calls · ${(u.total_tokens || 0).toLocaleString("en")} tokens (${u.prompt_tokens || 0} in / ${u.completion_tokens || 0} out)`,
        u.cost != null ? ` · $${Number(u.cost).toFixed(6)}` : " · cost unknown")));
    const pending = t.approvals.filter((a) => a.status === "pending");
    const want = new Set(pending.map((a) => a.id)); // cards stay put while pending (no re-render under a click)
    for (const n of [...parts.approvals.children]) if (!want.has(n.dataset.id)) n.remove();
    const have = new Set([...parts.approvals.children].map((n) => n.dataset.id));
    for (const a of pending) if (!have.has(a.id)) parts.approvals.append(approvalCard(a));
    parts.timeline.replaceWith(parts.timeline = timelineNode(tl));
    parts.transcript.replaceChildren(...t.messages.map((m) => messageNode(m, tl.tools)));
    if (poll) clearTimeout(poll);
    poll = (st === "running" || st === "waiting") && !sending ? setTimeout(() => refresh().catch(showError), 1500) : null;
  };
  let queued = null;
  const later = () => { if (!queued) queued = setTimeout(() => { queued = null; refresh().catch(showError); }, 150); };
  const onEvent = (ev) => {
    if (ev.type === "delta") { liveSection.hidden = false; liveBox.textContent += ev.text; }
    else if (ev.type === "result") { finished = true; later(); }
    else if (ev.type === "approval.pending" || ev.type === "approval.answered" || ev.type.startsWith("turn.") || ev.type.startsWith("tool.")) later();
  };
  const send = async (message) => {
    liveBox.textContent = ""; liveSection.hidden = false; sending = true; finished = false;
    document.getElementById("turn-status")?.replaceWith(statusBadge("running", { id: "turn-status" }));
    setTimeout(later, 300);
    try { await stream(path + "/messages", { method: "POST", body: JSON.stringify({ message, stream: true }) }, onEvent); }
    finally { sending = false; }
    await refresh();
  };
  const kids = [el("h2", {}, title), parts.facts, parts.approvals];
  if (me.can.run) {
    const input = el("input", { id: "message", placeholder: "continue the session", "aria-label": "message" });
    kids.push(el("form", { class: "row", id: "send", on: { submit: (ev) => { ev.preventDefault(); const v = input.value; input.value = ""; send(v); } } },
      input, el("button", { type: "submit" }, "Send")));
  }
  kids.push(liveSection, el("h3", {}, "Timeline"), parts.timeline, el("h3", {}, "Transcript"), parts.transcript);
  main().replaceChildren(...kids);
  await refresh();
  const first = sessionStorage.getItem("clawkit.send");
  if (first && me.can.run) { sessionStorage.removeItem("clawkit.send"); send(first); }
  else stream(path + "/events", { method: "GET" }, onEvent);
}

function approvalCard(a) {
  const answer = async (decision) => {
    try {
      await api("/api/approvals/" + a.id, { method: "POST", body: JSON.stringify({ decision, call_hash: a.call_hash }) });
      card.replaceChildren(el("span", { class: "badge " + (decision === "approve" ? "ok" : "bad") }, decision === "approve" ? "approved" : "denied"), " ", a.tool);
    } catch (e) { card.append(el("p", { class: "error" }, e.message)); }
  };
  const controls = me.can.approve
    ? [el("button", { class: "approve", type: "button", on: { click: () => answer("approve") } }, "Approve"), " ",
       el("button", { class: "deny", type: "button", on: { click: () => answer("deny") } }, "Deny")]
    : [el("small", { class: "no-approve" }, "waiting for someone with an approver key")];
  const card = el("div", { class: "card approval-card", "data-id": a.id, "data-tool": a.tool },
    el("div", {}, el("span", { class: "badge warn" }, "waiting for approval"), " ", el("strong", {}, a.tool), " ",
      el("span", { class: "badge " + (a.risk === "unsafe" ? "bad" : "warn") }, "risk: " + (a.risk || "?"))),
    el("div", {}, "because: ", a.reason),
    el("pre", { class: "arguments" }, json(a.arguments)),
    el("div", {}, el("small", {}, "session ", el("a", { href: "#/session/" + a.session_id }, a.session_id), " · expires ", when(a.expires), " · call hash ", a.call_hash.slice(0, 12), "…")),
    el("div", { class: "controls" }, controls));
  return card;
}

async function approvalsView() {
  const { approvals } = await api("/api/approvals?status=pending");
  const list = el("div", { id: "approvals" }, approvals.length ? approvals.map(approvalCard) : el("p", { id: "no-approvals" }, "No pending approvals."));
  main().replaceChildren(el("h2", {}, "Pending approvals"), list);
  stream("/api/events", { method: "GET" }, (ev) => { if (ev.type === "approval.pending") { document.getElementById("no-approvals")?.remove(); list.append(approvalCard(ev.approval)); } });
}

async function auditView() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const { agents } = await api("/api/agents");
  const agent = params.get("agent") || agents[0]?.name || "";
  const fields = ["tool", "decision", "kind", "session"];
  const inputs = Object.fromEntries(fields.map((f) => [f, el("input", { name: f, placeholder: f, value: params.get(f) || "", size: 14 })]));
  const agentSel = el("select", { name: "agent" }, agents.map((a) => el("option", { value: a.name, ...(a.name === agent ? { selected: "" } : {}) }, a.name)));
  const form = el("form", { class: "row", id: "audit-filter", on: { submit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams({ agent: agentSel.value });
    for (const f of fields) if (inputs[f].value) q.set(f, inputs[f].value);
    location.hash = "#/audit?" + q.toString();
  } } }, agentSel, Object.values(inputs), el("button", { type: "submit" }, "Filter"));
  const q = new URLSearchParams({ agent });
  for (const f of fields) if (params.get(f)) q.set(f, params.get(f));
  const [v, { records }] = await Promise.all([api("/api/audit/verify?agent=" + encodeURIComponent(agent)), api("/api/audit?" + q.toString())]);
  const badge = el("span", { id: "verification", class: "badge " + (v.ok ? "ok" : "bad") },
    v.ok ? `verified: ${v.records} records, chain intact` : `FAILED verification: ${v.problems.join("; ")}`);
  const cells = (r) => [["record", "#" + r.seq], ["time", when(r.ts)], ["kind", r.kind], ["tool", r.tool || "-"], ["decision", r.decision || "-"],
    ["approval", r.approval_result ? `${r.approval_result} by ${r.approval_by || "?"}` : ""], ["reason", r.reason || ""], ["session", r.session_id || ""]];
  const rows = records.slice().reverse().map((r) => el("tr", {}, cells(r).map(([h, v]) => el("td", { "data-label": h }, v || null))));
  main().replaceChildren(el("h2", {}, "Audit ledger"), el("p", {}, badge), form,
    el("table", { id: "audit", class: "stack" }, el("tr", {}, ["#", "time", "kind", "tool", "decision", "approval", "reason", "session"].map((h) => el("th", {}, h))), rows));
}

// --- routing -----------------------------------------------------------------------------

async function render() {
  stopLive();
  if (!sessionStorage.getItem(KEY)) return signinView();
  const nav = document.getElementById("nav");
  nav.hidden = false;
  const [route, arg] = location.hash.replace(/^#\//, "").split("?")[0].split("/");
  for (const a of nav.querySelectorAll("a")) a.classList.toggle("active", a.id === "nav-" + (route === "session" ? "sessions" : route));
  try {
    me = (await api("/api/panel/me")).key;
    document.getElementById("who").textContent = `${me.name} (${me.role})`;
    if (route === "session" && arg) await sessionView(decodeURIComponent(arg));
    else if (route === "approvals") await approvalsView();
    else if (route === "audit") await auditView();
    else await sessionsView();
  } catch (e) { showError(e); }
}

window.addEventListener("hashchange", render);
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("signout").addEventListener("click", signOut);
  render();
});
