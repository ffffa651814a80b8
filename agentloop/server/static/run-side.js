// The run page's side cards: usage and cost, the run's facts and links, its controls, the sub-agent tree.

import { D, enc, el, fill, toast, toastError } from "./dom.js";
import { LIVE, fmtInt, fmtCost, fmtDuration, fmtWhen, badge, short } from "./format.js";
import { api } from "./api.js";

export function sideCards(P) {
  const { S, runId, isThread, title, costCard, factsCard, treeCard, actionsCard } = P;

  // --- the side cards
  let refreshTimer = 0;
  function refreshSoon() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => { refreshTimer = 0; loadFacts(); }, 700);
  }

  async function loadFacts() {
    const [state, report] = await Promise.allSettled([api(`/v1/runs/${enc(runId)}`), api(`/v1/runs/${enc(runId)}/report`)]);
    if (state.status === "fulfilled") S.state = state.value;
    if (report.status === "fulfilled") S.report = report.value;
    if (S.state && S.state.status && (!S.ended || !LIVE.has(S.state.status))) P.setStatus(S.state.status);
    if (S.state && !S.agentName && S.state.agent_name) {
      S.agentName = S.state.agent_name;
      if (!isThread) title.textContent = S.agentName;
    }
    renderFacts();
    renderTree();
    return state.status === "rejected" ? state.reason : null;
  }

  function renderFacts() {
    const st = S.state || {};
    const rp = S.report || {};
    const usage = rp.total_usage || st.usage || {};
    const cost = rp.total_cost_usd;
    fill(costCard.lastChild,
      el("div", { class: "cost", id: "cost", text: fmtCost(cost) }),
      el("div", { class: "cost-note", text: cost == null ? "the model's price is not known" : "at the model's list price, sub-agents included" }),
      el("dl", { class: "facts spaced" },
        el("dt", { text: "Input tokens" }), el("dd", { id: "input-tokens", text: fmtInt(usage.input_tokens) }),
        el("dt", { text: "Cached input tokens" }), el("dd", { text: fmtInt(usage.cached_input_tokens) }),
        el("dt", { text: "Output tokens" }), el("dd", { id: "output-tokens", text: fmtInt(usage.output_tokens) }),
        el("dt", { text: "LLM requests" }), el("dd", { text: fmtInt(usage.requests) }),
        el("dt", { text: "LLM time" }), el("dd", { text: fmtDuration(rp.total_llm_time_ms) }),
        el("dt", { text: "Tool time" }), el("dd", { id: "tool-time", text: fmtDuration(rp.total_tool_time_ms) }),
        el("dt", { text: "Approval wait" }), el("dd", { id: "approval-wait", text: fmtDuration(rp.total_approval_wait_ms) })));
    const facts = [
      ["Agent", st.agent_name || S.agentName || "—"],
      ["Model", st.model || rp.model || "—"],
      ["Steps", fmtInt(rp.step_count ?? st.step)],
      ["Tool calls", fmtInt(rp.tool_call_count)],
      ["Started", rp.started_at ? fmtWhen(rp.started_at) : "—"],
      ["Duration", fmtDuration(rp.total_ms)],
      // The spec's workspace, else the default of the worker that runs it (when this server knows it).
      ["Workspace", st.workspace || D.defaultWorkspace || "the worker's default"],
    ];
    if (st.thread_id) facts.push(["Turn", String(st.turn || 0)], ["Queued", String(st.queued || 0)]);
    const links = [];
    if (D.temporalUi) links.push(el("a", { href: D.temporalUi, target: "_blank", rel: "noopener noreferrer", id: "temporal-link" }, "Open in the Temporal UI ↗"));
    if (st.thread_id && !isThread) links.push(el("a", { href: `/threads/${enc(st.thread_id)}`, id: "thread-link" }, "Open the thread (send a message) →"));
    if (isThread) links.push(el("a", { href: `/runs/${enc(runId)}` }, "Open as a run"));
    links.push(el("a", { href: `/diff?a=${enc(runId)}`, id: "compare-link" }, "Compare with another run →"));
    const parent = st.parent_run_id || (st.parent && st.parent.parent_run_id);
    if (parent) links.push(el("a", { href: `/runs/${enc(parent)}` }, `Delegated by ${short(parent, 30)}`));
    fill(factsCard.lastChild,
      el("dl", { class: "facts" }, facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })])),
      st.error || rp.error ? el("p", { class: "error-box small", text: st.error || rp.error }) : null,
      links.length ? el("div", { class: "links spaced" }, links) : null);
  }

  function renderControls() {
    const isLive = LIVE.has(S.status) && !S.ended;
    actionsCard.hidden = !isLive;
    if (!isLive) return;
    const thread = isThread || (S.state && S.state.thread_id);
    const stop = el("button", { type: "button", text: thread ? "End the thread" : "Stop after this step" });
    const cancel = el("button", { type: "button", class: "danger", text: "Cancel" });
    stop.addEventListener("click", () => control("stop", "Stop requested: the run ends after its step under way.", stop));
    cancel.addEventListener("click", () => {
      if (confirm("Cancel this run now? Work under way is abandoned.")) control("cancel", "Cancel requested.", cancel);
    });
    fill(actionsCard.lastChild, el("div", { class: "actions-row" }, stop, cancel));
  }

  async function control(what, done, button) {
    button.disabled = true;
    try {
      await api(`/v1/runs/${enc(runId)}/${what}`, { method: "POST", body: {} });
      toast(done);
    } catch (err) {
      toastError(err);
      button.disabled = false;
    }
  }

  // The sub-agent tree: this run's sub-runs, and theirs (read from their reports).
  async function renderTree() {
    const children = (S.report && S.report.sub_runs) || [];
    if (!children.length) { treeCard.hidden = true; return; }
    let budget = 60;
    async function branch(subRuns, depth) {
      const ul = el("ul");
      for (const r of subRuns) {
        if (budget-- <= 0) break;
        const li = el("li", {}, el("div", { class: "node" },
          badge(r.status), el("a", { href: `/runs/${enc(r.run_id)}`, title: r.run_id, text: r.name }),
          el("span", { class: "cost-small", text: `${fmtInt((r.usage || {}).input_tokens + (r.usage || {}).output_tokens)} tok · ${fmtCost(r.cost_usd)}` })));
        if (depth < 5) {
          let report = S.tree.get(r.run_id);
          if (!report || LIVE.has(r.status)) {
            try { report = await api(`/v1/runs/${enc(r.run_id)}/report`); S.tree.set(r.run_id, report); } catch { report = null; }
          }
          if (report && report.sub_runs && report.sub_runs.length) li.append(await branch(report.sub_runs, depth + 1));
        }
        ul.append(li);
      }
      return ul;
    }
    const tree = await branch(children, 1);
    tree.className = "tree";
    treeCard.hidden = false;
    fill(treeCard.lastChild, tree);
  }

  return { refreshSoon, loadFacts, renderFacts, renderControls, control, renderTree };
}
