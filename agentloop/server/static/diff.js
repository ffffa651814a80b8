// The page /diff?a=RUN&b=RUN: two runs aligned step by step, side by side (GET /v1/diff).
// Without both ids it asks for them (a run's page links here with ?a= set: "Compare with another run").

import { app, enc, el, fill, toastError } from "./dom.js";
import { api } from "./api.js";
import { fmtCost, fmtInt } from "./format.js";

const PARTS = { input: "Input", user: "User", message: "Model", tool_call: "Tool call", tool_result: "Result", output: "Output" };
const MARK = { same: "=", changed: "~", only_a: "−", only_b: "+" };

export function diffPage() {
  const q = new URLSearchParams(location.search);
  const a = (q.get("a") || "").trim();
  const b = (q.get("b") || "").trim();
  fill(app, el("div", { class: "page-head" }, el("h1", { text: "Compare two runs" })), askIds(a, b));
  if (a && b) show(a, b);
}

function askIds(a, b) {
  const input = (name, value, label) => el("input", { name, value, required: true, placeholder: label, "aria-label": label, class: "mono" });
  return el("form", { class: "diff-ask", method: "get", action: "/diff", id: "diff-form" },
    input("a", a, "run A id"), input("b", b, "run B id"),
    el("button", { type: "submit", class: "primary", text: "Compare" }));
}

async function show(a, b) {
  const out = el("div", { id: "diff", class: "diff", "aria-busy": "true" }, el("p", { class: "muted", text: "Comparing…" }));
  app.append(out);
  try {
    const d = await api(`/v1/diff?a=${enc(a)}&b=${enc(b)}`);
    fill(out, runsCard(d), definitionCard(d.definition), rowsCard(d), usageCard(d.usage),
      d.notes.length ? el("section", { class: "card", id: "diff-notes" }, el("h2", { text: "Notes" }),
        el("ul", { class: "card-body" }, d.notes.map((n) => el("li", { text: n })))) : null);
  } catch (err) {
    fill(out, el("p", { class: "error-box", id: "diff-error", text: err.message }));
    toastError(err);
  }
  out.removeAttribute("aria-busy");
}

function runLink(side, label) {
  return el("div", { class: "diff-run" }, el("strong", { text: `${label} ` }),
    el("a", { href: `/runs/${enc(side.run_id)}`, class: "mono", text: side.run_id }),
    el("span", { class: "muted", text: ` · ${side.status} · ${fmtInt(side.steps)} steps · agent ${side.fingerprint} · ${side.model}` }));
}

function runsCard(d) {
  const tools = d.same_tools ? "the same tools in the same order"
    : `different tools: A ${d.a.tool_calls.join(", ") || "none"}; B ${d.b.tool_calls.join(", ") || "none"}`;
  return el("section", { class: "card", id: "diff-runs" }, el("div", { class: "card-body" },
    runLink(d.a, "A"), runLink(d.b, "B"),
    el("p", { class: "spaced", id: "diff-summary", text: `${d.changed} of ${d.rows.length} rows differ; ${tools}` })));
}

function definitionCard(def) {
  const s = def.summary;
  const head = def.same ? `Unchanged (${def.a})` : `Changed: ${def.a} → ${def.b}`;
  return el("section", { class: "card", id: "diff-definition" }, el("h2", { text: "Agent definition" }),
    el("div", { class: "card-body" }, el("p", { text: head }),
      def.fields.length ? el("table", { class: "diff-table fields" },
        el("tr", {}, ["Part", "Field", "A", "B"].map((t) => el("th", { text: t }))),
        def.fields.map((f) => el("tr", {}, el("td", { text: f.part }), el("td", { class: "mono", text: f.field }),
          el("td", { class: "mono del", text: f.a }), el("td", { class: "mono ins", text: f.b })))) : null,
      s.tools_added.length || s.tools_removed.length ? el("p", { class: "small", text:
        `tools added: ${s.tools_added.join(", ") || "none"}; removed: ${s.tools_removed.join(", ") || "none"}` }) : null));
}

// One side of a changed row: its words, those only on this side highlighted.
function words(segments, side) {
  const drop = side === "a" ? "added" : "removed";
  return segments.filter((s) => s.op !== drop).map((s) =>
    s.op === "same" ? document.createTextNode(s.text) : el(side === "a" ? "del" : "ins", { text: s.text }));
}

function cells(row) {
  if (row.type === "changed") return [el("div", { class: "cell a" }, words(row.words, "a")), el("div", { class: "cell b" }, words(row.words, "b"))];
  if (row.type === "only_a") return [el("div", { class: "cell a del", text: row.text }), el("div", { class: "cell none" })];
  if (row.type === "only_b") return [el("div", { class: "cell none" }), el("div", { class: "cell b ins", text: row.text })];
  return [el("div", { class: "cell a", text: row.text }), el("div", { class: "cell b", text: row.text })];
}

function where(row) {
  if (row.part === "input" || row.part === "output") return PARTS[row.part];
  const step = (n) => (n == null ? "·" : String(n));
  const tool = row.tool_a || row.tool_b ? ` ${row.tool_a && row.tool_b && row.tool_a !== row.tool_b ? `${row.tool_a} → ${row.tool_b}` : row.tool_a || row.tool_b}` : "";
  return `Step ${step(row.step_a)}|${step(row.step_b)} · ${PARTS[row.part]}${tool}`;
}

function rowsCard(d) {
  return el("section", { class: "card", id: "diff-steps" }, el("h2", { text: "Step by step" }),
    el("div", { class: "diff-rows" },
      el("div", { class: "diff-row head" }, el("div", { text: "" }), el("div", { text: `A ${d.a.run_id}` }), el("div", { text: `B ${d.b.run_id}` })),
      d.rows.map((row) => el("div", { class: `diff-row ${row.type}`, "data-part": row.part },
        el("div", { class: "where", title: row.type }, el("span", { class: "mark", text: MARK[row.type] }), where(row)), cells(row)))));
}

function usageCard(usage) {
  const fmt = (name, v) => (v == null ? "unknown" : name === "cost_usd" ? fmtCost(v) : fmtInt(v));
  const delta = (name, v) => (v == null ? "unknown" : (v > 0 ? "+" : "") + (name === "cost_usd" ? v.toFixed(6) : fmtInt(v)));
  return el("section", { class: "card", id: "diff-usage" }, el("h2", { text: "Usage and cost" }),
    el("div", { class: "card-body" }, el("table", { class: "diff-table" },
      el("tr", {}, ["", "A", "B", "B − A"].map((t) => el("th", { text: t }))),
      usage.map((u) => el("tr", {}, el("td", { text: u.name.replace(/_/g, " ") }), el("td", { text: fmt(u.name, u.a) }),
        el("td", { text: fmt(u.name, u.b) }), el("td", { class: u.delta ? "delta" : "", text: delta(u.name, u.delta) }))))));
}
