// clawkit panel: a key in sessionStorage, the JSON API with a Bearer header, DOM built with
// textContent only (data never becomes markup), live updates read from SSE over fetch.
"use strict";

const KEY = "clawkit.key";
const main = () => document.getElementById("main");
let live = null; // the AbortController of the current live stream

function el(tag, attrs = {}, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "on") for (const [ev, fn] of Object.entries(v)) n.addEventListener(ev, fn);
    else if (v !== undefined && v !== null) n.setAttribute(k, v);
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined) n.append(kid instanceof Node ? kid : String(kid));
  return n;
}

const when = (ts) => (ts ? new Date(ts * 1000).toLocaleString() : "-");
const json = (v) => JSON.stringify(v, null, 2);

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

function stopLive() { if (live) { live.abort(); live = null; } }

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
    try { await api("/api/agents", { signingIn: true }); location.hash = "#/sessions"; render(); }
    catch (e) { sessionStorage.removeItem(KEY); msg.textContent = "Sign-in failed: " + e.message; }
  } } }, el("h2", {}, "Sign in"), el("p", {}, "Paste an API key (clawkit keys create). It stays in this tab only."),
    input, " ", el("button", { type: "submit", id: "signin-button" }, "Sign in"), msg);
  main().replaceChildren(form);
}

async function sessionsView() {
  const [{ agents }, { sessions }] = await Promise.all([api("/api/agents"), api("/api/sessions?limit=100")]);
  const agentSel = el("select", { id: "agent" }, agents.map((a) => el("option", { value: a.name }, a.name)));
  const text = el("input", { id: "message", size: 60, placeholder: "message to the agent" });
  const form = el("form", { class: "row", id: "new-turn", on: { submit: async (ev) => {
    ev.preventDefault();
    try {
      const s = await api("/api/sessions", { method: "POST", body: JSON.stringify({ agent: agentSel.value }) });
      sessionStorage.setItem("clawkit.send", text.value);
      location.hash = "#/session/" + s.session_id;
    } catch (e) { showError(e); }
  } } }, el("strong", {}, "New session:"), agentSel, text, el("button", { type: "submit" }, "Send"));
  const rows = sessions.map((s) => el("tr", {},
    el("td", {}, el("a", { href: "#/session/" + s.id, class: "session-link", title: s.id }, s.label || s.id)), el("td", {}, s.agent),
    el("td", {}, s.messages), el("td", {}, when(s.updated)), el("td", {}, s.busy ? el("span", { class: "badge warn" }, "running") : "")));
  main().replaceChildren(el("h2", {}, "Sessions"), form,
    el("table", { id: "sessions" }, el("tr", {}, ["session", "agent", "messages", "updated", ""].map((h) => el("th", {}, h))), rows));
}

function messageNode(m) {
  const kids = [el("div", { class: "role" }, m.role)];
  if (m.content) kids.push(el("pre", {}, m.content));
  for (const c of m.tool_calls || []) kids.push(el("div", { class: "tool-call" }, "→ ", el("strong", {}, c.name), el("pre", {}, json(c.arguments))));
  if (m.tool_result && m.tool_result.is_error) kids.push(el("span", { class: "badge bad" }, "error"));
  return el("div", { class: "msg " + m.role }, kids);
}

async function sessionView(id, carry = null) {
  stopLive();
  const t = await api("/api/sessions/" + encodeURIComponent(id));
  const liveBox = el("pre", { id: "live" }, carry ? carry.live : "");
  const state = t.busy ? "running" : carry ? "done" : "idle";
  const status = el("span", { id: "turn-status", class: "badge" + ({ running: " warn", done: " ok" }[state] || "") }, state);
  const input = el("input", { id: "message", size: 60, placeholder: "continue the session" });
  const u = t.usage || {};
  const facts = el("div", { class: "card", id: "facts" },
    el("div", {}, "agent ", el("strong", {}, t.agent), " · ", status),
    el("div", { id: "classification" }, "classification: ", t.classification ? `${t.classification.label || "-"} [${(t.classification.tags || []).join(", ")}]` : "—"),
    el("div", { id: "plan" }, "plan: ", t.plan ? el("pre", {}, json(t.plan)) : "—"),
    el("div", { id: "usage" }, `usage: ${u.calls || 0} model calls, ${u.prompt_tokens || 0} in / ${u.completion_tokens || 0} out tokens`,
      u.cost != null ? `, $${Number(u.cost).toFixed(6)}` : ""));
  const pending = t.approvals.filter((a) => a.status === "pending").map(approvalCard);
  const send = async (message) => {
    liveBox.textContent = "";
    status.textContent = "running"; status.className = "badge warn";
    await stream(`/api/sessions/${encodeURIComponent(id)}/messages`, { method: "POST", body: JSON.stringify({ message, stream: true }) }, onEvent);
    await sessionView(id, { live: liveBox.textContent }); // the transcript as stored; the streamed text stays
  };
  const onEvent = (ev) => {
    if (ev.type === "delta") liveBox.textContent += ev.text;
    else if (ev.type === "approval.pending") { document.getElementById("session-approvals").append(approvalCard(ev.approval)); }
    else if (ev.type === "tool.approval" || ev.type === "approval.answered") { document.querySelectorAll(".approval-card").forEach((n) => { if (n.dataset.id === ev.approval?.id) n.remove(); }); }
    else if (ev.type === "result") { status.textContent = "done"; status.className = "badge ok"; }
  };
  const form = el("form", { class: "row", on: { submit: (ev) => { ev.preventDefault(); send(input.value); } } }, input, el("button", { type: "submit" }, "Send"));
  main().replaceChildren(el("h2", {}, "Session ", el("code", {}, id)), facts,
    el("div", { id: "session-approvals" }, pending), form, el("h3", {}, "Live"), liveBox,
    el("h3", {}, "Transcript"), el("div", { id: "transcript" }, t.messages.map(messageNode)),
    el("h3", {}, "Events"), el("table", { id: "events" }, t.events.map((e) => el("tr", {}, el("td", {}, when(e.ts)), el("td", {}, e.type), el("td", {}, el("pre", {}, json(e.data)))))));
  const queued = sessionStorage.getItem("clawkit.send");
  if (queued) { sessionStorage.removeItem("clawkit.send"); send(queued); }
  else stream(`/api/sessions/${encodeURIComponent(id)}/events`, { method: "GET" }, (ev) => {
    onEvent(ev);
    if (ev.type === "turn.done") sessionView(id, { live: liveBox.textContent });
  });
}

function approvalCard(a) {
  const answer = async (decision) => {
    try {
      await api("/api/approvals/" + a.id, { method: "POST", body: JSON.stringify({ decision, call_hash: a.call_hash }) });
      card.replaceChildren(el("span", { class: "badge " + (decision === "approve" ? "ok" : "bad") }, decision === "approve" ? "approved" : "denied"), " ", a.tool);
    } catch (e) { card.append(el("p", { class: "error" }, e.message)); }
  };
  const card = el("div", { class: "card approval-card", "data-id": a.id, "data-tool": a.tool },
    el("div", {}, el("strong", {}, a.tool), " ", el("span", { class: "badge " + (a.risk === "unsafe" ? "bad" : "warn") }, "risk: " + (a.risk || "?")),
      " · session ", el("a", { href: "#/session/" + a.session_id }, a.session_id), " · expires ", when(a.expires)),
    el("div", {}, "because: ", a.reason),
    el("pre", { class: "arguments" }, json(a.arguments)),
    el("div", {}, el("small", {}, "call hash ", a.call_hash)),
    el("button", { class: "approve", type: "button", on: { click: () => answer("approve") } }, "Approve"), " ",
    el("button", { class: "deny", type: "button", on: { click: () => answer("deny") } }, "Deny"));
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
  const rows = records.slice().reverse().map((r) => el("tr", {}, el("td", {}, "#" + r.seq), el("td", {}, when(r.ts)), el("td", {}, r.kind),
    el("td", {}, r.tool || "-"), el("td", {}, r.decision || "-"), el("td", {}, r.approval_result ? `${r.approval_result} by ${r.approval_by || "?"}` : ""),
    el("td", {}, r.reason || ""), el("td", {}, r.session_id || "")));
  main().replaceChildren(el("h2", {}, "Audit ledger"), el("p", {}, badge), form,
    el("table", { id: "audit" }, el("tr", {}, ["#", "time", "kind", "tool", "decision", "approval", "reason", "session"].map((h) => el("th", {}, h))), rows));
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
    const who = await api("/api/agents");
    document.getElementById("who").textContent = `${who.key.name} (${who.key.role})`;
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
