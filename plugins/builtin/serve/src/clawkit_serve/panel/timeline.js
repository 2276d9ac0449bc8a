// clawkit panel: a session's turns as bars on a time axis (model calls, tool calls, sub-agents,
// approvals), details on click. Uses el() and friends from panel.js; no dependencies.
"use strict";

const KINDS = { model: "model", tool: "tool", agent: "sub-agent", approval: "approval" };

function secs(s) {
  if (s == null) return "…";
  if (s < 1) return Math.round(s * 1000) + " ms";
  if (s < 120) return s.toFixed(s < 10 ? 2 : 1) + " s";
  return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
}
const tokens = (n) => (n ? Number(n).toLocaleString("en") + " tok" : "");
const dollars = (c) => (c == null ? "" : "$" + Number(c).toFixed(c < 0.01 ? 5 : 3));

function fields(pairs) {
  return el("dl", { class: "fields" }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => [el("dt", {}, k), el("dd", {}, v instanceof Node ? v : String(v))]));
}

function untrustedBadge(out) {
  return el("span", { class: "badge warn untrusted", title: `from ${out.source || out.name || "a tool"}: the model saw it marked as untrusted data` },
    out.injection_warning ? "untrusted · injection warning" : "untrusted");
}

function barDetails(b) {
  const d = b.detail || {};
  const common = [["kind", KINDS[b.kind]], ["name", b.name], ["status", b.status], ["duration", secs(b.duration)],
    ["started", new Date(b.start * 1000).toLocaleTimeString()]];
  if (b.kind === "model") return fields([...common, ["prompt tokens", d.prompt_tokens], ["completion tokens", d.completion_tokens],
    ["cost", dollars(b.cost) || "unknown"], ["estimated", d.estimated ? "yes" : ""]]);
  if (b.kind === "approval") return fields([...common, ["risk", d.risk], ["because", d.reason], ["answered by", d.answered_by],
    ["waited", secs(d.waited)], ["arguments", el("pre", {}, json(d.arguments))]]);
  if (b.kind === "agent") return fields([...common, ["run", d.run], ["session", d.session], ["tokens", tokens(b.tokens)], ["cost", dollars(b.cost)]]);
  const out = d.output != null ? el("div", {}, d.untrusted ? untrustedBadge(d) : null, d.is_error ? el("span", { class: "badge bad" }, "error") : null,
    el("pre", { class: "tool-output" }, d.output + (d.truncated ? "\n… (cut)" : ""))) : "(no result stored yet)";
  return fields([...common, ["arguments", el("pre", {}, json(d.arguments))], ["output", out]]);
}

function size(n) {
  if (n == null) return "";
  if (n >= 1048576) return (n / 1048576).toFixed(1) + " MB";
  return n >= 1024 ? (n / 1024).toFixed(1) + " KB" : n + " B";
}

// the files the user attached to the turn's message: name, type, size (the bytes stay on the server)
function attachmentsNode(list) {
  if (!list.length) return "";
  return el("ul", { class: "attachments" }, list.map((a) => el("li", { class: "attachment", title: "sha256 " + (a.sha256 || "") + (a.source ? " · from " + a.source : "") },
    el("span", { class: "muted" }, "attached "), el("strong", {}, a.name || "attachment"), " · " + (a.media_type || "?") + " · " + size(a.size))));
}

function turnNode(turn, now, open) {
  const t0 = turn.started;
  const t1 = Math.max(turn.ended || now, ...turn.bars.map((b) => b.end || now));
  const span = Math.max(t1 - t0, 0.001);
  const rows = turn.bars.map((b) => {
    const left = ((b.start - t0) / span) * 100;
    const width = Math.max((((b.end || now) - b.start) / span) * 100, 0.6);
    const details = el("div", { class: "bar-details", hidden: "" }, barDetails(b));
    const label = [b.kind === "tool" && b.untrusted ? "⚠ " : "", KINDS[b.kind], " ", el("strong", {}, b.name)];
    const facts = [secs(b.end == null ? null : b.duration), tokens(b.tokens), dollars(b.cost), b.end == null ? b.status : ""].filter(Boolean).join(" · ");
    const row = el("div", { class: `tl-row ${b.kind} st-${b.status}`, "data-kind": b.kind, "data-name": b.name, tabindex: 0, role: "button",
      on: { click: () => { details.hidden = !details.hidden; }, keydown: (e) => { if (e.key === "Enter") details.hidden = !details.hidden; } } },
      el("div", { class: "tl-label" }, label),
      el("div", { class: "tl-track" }, el("div", { class: "tl-bar" + (b.end == null ? " open" : ""), style: { left: left.toFixed(2) + "%", width: Math.min(width, 100 - left).toFixed(2) + "%" } })),
      el("div", { class: "tl-facts" }, facts));
    return [row, details];
  });
  const head = el("summary", { class: "turn-head" }, el("span", { class: "turn-title" }, turn.title || "(turn)"),
    el("span", { class: "turn-facts" }, [secs(turn.ended ? turn.ended - turn.started : null), tokens(turn.tokens), dollars(turn.cost)].filter(Boolean).join(" · ")),
    el("span", { class: "badge " + ({ done: "ok", running: "warn", error: "bad" }[turn.status] || "") }, turn.status));
  return el("details", { class: "turn", ...(open ? { open: "" } : {}) }, head, attachmentsNode(turn.attachments || []),
    el("div", { class: "tl-axis" }, el("span", {}, "0"), el("span", {}, secs(span))), rows.length ? rows : el("p", {}, "nothing recorded yet"));
}

function timelineNode(tl) {
  if (!tl.turns.length) return el("div", { id: "timeline" }, el("p", {}, "No turns yet."));
  const last = tl.turns.length - 1;
  return el("div", { id: "timeline" }, tl.turns.map((t, i) => turnNode(t, tl.now, i === last || t.status === "running")));
}
