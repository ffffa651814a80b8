// The evals list (/evals) and an eval's page (/evals/<id>): each case with pass or fail,
// its reasons, links to the recorded run, the candidate's run and their diff (/diff?a=&b=).

import { app, enc, el, fill, toastError } from "./dom.js";
import { fmtAgo, fmtCost, fmtWhen } from "./format.js";
import { api } from "./api.js";

function card(title, ...body) {
  return el("section", { class: "card" }, el("h2", { text: title }), el("div", { class: "card-body" }, ...body));
}

export async function evalsPage() {
  const list = el("div", { class: "runs", id: "evals" });
  fill(app, card("Evals", list));
  try {
    const { evals } = await api("/v1/evals");
    fill(list, evals.length ? evals.map((e) => el("a", { class: "run-row eval-row", href: `/evals/${enc(e.eval_id)}`, "data-eval-id": e.eval_id },
      el("span", { class: "status", text: e.status }),
      el("span", { class: "rid", text: e.eval_id }),
      el("span", { class: "when", title: fmtWhen(e.started_at), text: fmtAgo(e.started_at) }),
    )) : el("p", { class: "muted", text: "No evals yet: `agentloop eval run --query ...` starts one." }));
  } catch (err) {
    toastError(err);
  }
}

function runLink(id) {
  return id ? el("a", { href: `/runs/${enc(id)}`, text: id }) : el("span", { class: "muted", text: "—" });
}

function caseRow(c) {
  const diff = c.recorded_run_id
    ? el("a", { class: "diff-link", href: `/diff?a=${enc(c.recorded_run_id)}&b=${enc(c.run_id)}`, text: "diff" }) : null;
  return el("tr", { class: c.passed ? "case pass" : "case fail", "data-case-id": c.case_id },
    el("td", { text: c.case_id }),
    el("td", { class: "verdict", text: c.passed ? "pass" : "FAIL" }),
    el("td", { class: "reasons", text: (c.reasons || []).join("; ") }),
    el("td", {}, runLink(c.recorded_run_id)),
    el("td", {}, runLink(c.run_id)),
    el("td", {}, diff),
  );
}

function totalsBox(t) {
  const p = (m, cost) => `p50 ${cost ? fmtCost(m.p50) : m.p50 ?? "—"} (recorded ${cost ? fmtCost(m.recorded_p50) : m.recorded_p50 ?? "—"}), p95 ${cost ? fmtCost(m.p95) : m.p95 ?? "—"} (recorded ${cost ? fmtCost(m.recorded_p95) : m.recorded_p95 ?? "—"})`;
  return el("dl", { class: "facts" },
    el("dt", { text: "Passed" }), el("dd", { class: "pass-rate", text: `${t.passed}/${t.cases} (${Math.round(t.pass_rate * 100)}%)` }),
    el("dt", { text: "Cost" }), el("dd", { text: p(t.cost_usd, true) }),
    el("dt", { text: "Tokens" }), el("dd", { text: p(t.tokens, false) }),
    el("dt", { text: "Steps" }), el("dd", { text: p(t.steps, false) }),
    el("dt", { text: "Tool calls" }), el("dd", { text: `${t.recorded} from the recording, ${t.live} live, ${t.refused} refused` }),
  );
}

export async function evalPage(id) {
  const body = el("div", {});
  fill(app, card(`Eval ${id}`, body));
  try {
    const page = await api(`/v1/evals/${enc(id)}`);
    const cases = page.report ? page.report.cases : (page.progress ? page.progress.done : []);
    const table = el("table", { class: "eval-cases" },
      el("thead", {}, el("tr", {}, ["Case", "Result", "Why", "Recorded run", "Candidate run", ""].map((h) => el("th", { text: h })))),
      el("tbody", {}, cases.map(caseRow)));
    fill(body,
      el("p", { class: "muted eval-status", text: page.report ? `candidate: ${page.report.candidate}`
        : page.status === "running" ? `running: ${cases.length} of ${page.progress ? page.progress.total : "?"} cases done`
        : `the eval ended ${page.status}` }),
      page.report ? totalsBox(page.report.totals) : null,
      table);
    if (page.status === "running") setTimeout(() => evalPage(id), 2000);
  } catch (err) {
    toastError(err);
  }
}
