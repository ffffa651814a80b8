// What a run waits for: approvals to decide and client tools' outputs to send.

import { enc, el, fill, toast, toastError } from "./dom.js";
import { fmtAgo, badge, jsonBlock } from "./format.js";
import { api } from "./api.js";

export function waitingView(P) {
  const { S, runId, waiting } = P;

  // --- what the run waits for
  function renderWaiting() {
    const approvals = [...S.pending.values()];
    const actions = [...S.actions.values()];
    waiting.hidden = !approvals.length && !actions.length;
    if (waiting.hidden) { fill(waiting); return; }
    const parts = [];
    if (approvals.length) parts.push(`${approvals.length} call${approvals.length > 1 ? "s wait" : " waits"} for your decision`);
    if (actions.length) parts.push(`${actions.length} call${actions.length > 1 ? "s wait" : " waits"} for the client's output`);
    const heading = el("h2", {}, badge(approvals.length ? "awaiting_approval" : "requires_action"), parts.join("; "));
    const keep = new Map([...waiting.querySelectorAll(".decision")].map((n) => [n.dataset.callId, n]));
    const cards = [
      ...approvals.map((a) => keep.get(a.call_id) || decisionCard(a)),
      ...actions.map((a) => keep.get(a.call_id) || actionCard(a)),
    ];
    fill(waiting, heading, ...cards);
  }

  function decisionCard(a) {
    const reason = el("input", { type: "text", name: "reason", placeholder: "Reason (optional)", "aria-label": "Reason", maxlength: "2000" });
    const labels = { approve: "Approve", deny: "Deny", skip: "Skip" };
    const buttons = Object.keys(labels).map((d) => el("button", { type: "button", class: d, "data-decision": d, text: labels[d] }));
    buttons.forEach((b) => b.addEventListener("click", () => decide(a, b.dataset.decision, reason.value.trim(), buttons)));
    return el("div", { class: "decision", "data-call-id": a.call_id },
      el("div", { class: "decision-head" },
        el("span", { class: "tool-name", text: a.tool_name }),
        el("span", { class: "meta", text: `step ${a.step} · asked ${fmtAgo(a.asked_at)}${a.expires_at ? ` · expires ${fmtAgo(a.expires_at)}` : ""}` }),
        el("span", { class: "meta mono", text: a.call_id })),
      a.reason ? el("p", { class: "why", text: a.reason }) : null,
      jsonBlock(a.arguments || {}, "json wrap"),
      el("div", { class: "decision-form" }, reason, el("div", { class: "buttons" }, buttons)));
  }

  async function decide(a, decision, reason, buttons) {
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const body = { call_id: a.call_id, decision };
      if (reason) body.reason = reason;
      await api(`/v1/runs/${enc(runId)}/approvals`, { method: "POST", body });
      toast(`${{ approve: "Approved", deny: "Denied", skip: "Skipped" }[decision]} ${a.tool_name}`);
      S.pending.delete(a.call_id);
      renderWaiting();
    } catch (err) {
      toastError(err);
      if (err.status === 409 && /already/i.test(err.message)) { S.pending.delete(a.call_id); renderWaiting(); }
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  // The run takes the outputs of all the calls it waits for at once.
  function actionCard(a) {
    const output = el("textarea", { name: "output", rows: "3", placeholder: "The call's output, as the model should see it", "aria-label": `Output of ${a.tool_name}` });
    const isError = el("input", { type: "checkbox", name: "is_error" });
    const submit = el("button", { type: "submit", class: "primary", text: "Submit output" });
    const form = el("form", { class: "decision-form" }, output,
      el("label", { class: "check" }, isError, "failed"), el("div", { class: "buttons" }, submit));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const forms = [...waiting.querySelectorAll(".decision[data-kind=action]")];
      const outputs = forms.map((f) => ({
        call_id: f.dataset.callId, output: f.querySelector("textarea").value, is_error: f.querySelector("input[type=checkbox]").checked,
      }));
      submit.disabled = true;
      try {
        await api(`/v1/runs/${enc(runId)}/tool_outputs`, { method: "POST", body: { tool_outputs: outputs } });
        toast(outputs.length > 1 ? `${outputs.length} outputs sent` : `Output of ${a.tool_name} sent`);
        outputs.forEach((o) => S.actions.delete(o.call_id));
        renderWaiting();
      } catch (err) {
        toastError(err);
        submit.disabled = false;
      }
    });
    return el("div", { class: "decision", "data-kind": "action", "data-call-id": a.call_id },
      el("div", { class: "decision-head" },
        el("span", { class: "tool-name", text: a.tool_name }),
        el("span", { class: "meta", text: `step ${a.step} · ${a.reason === "client_tool" ? "a client tool" : a.reason}` }),
        el("span", { class: "meta mono", text: a.call_id })),
      jsonBlock(a.arguments || {}, "json wrap"), form);
  }

  return { renderWaiting, decisionCard, decide, actionCard };
}
