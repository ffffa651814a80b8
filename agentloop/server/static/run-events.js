// A run's events, each to what it changes on the run page (the types of agentloop.shared.runs.events).

import { enc, el, fill } from "./dom.js";
import { fmtInt } from "./format.js";

export function eventHandlers(P) {
  const { S, isThread, title, conv } = P;

  // Each event type shown, and what it does to the page; the others are not shown.
  return {
    "agent.run.created": (e) => {
      S.agentName = e.agent_name;
      if (!isThread) title.textContent = e.agent_name || "Run";
      for (const m of e.input || []) {
        const text = (m.content || []).filter((p) => p.type === "text").map((p) => p.text).join("");
        if (m.role === "user" && text) P.userMsg(text);
        else if (m.role === "assistant" && text) {
          const a = P.assistant(`input-${conv.children.length}`);
          a.textBuf = text;
          a.bubble.classList.remove("typing");
          P.paint(a);
        }
      }
    },
    "agent.run.status.changed": (e) => P.setStatus(e.status),
    "thread.message.created": (e) => { P.assistant(e.message_id); },
    "thread.message.delta": (e) => {
      const m = P.assistant(e.message_id);
      const d = e.delta;
      if (d.kind === "text") m.textBuf += d.text;
      else if (d.kind === "thinking") m.thinkingBuf += d.text;
      else if (d.kind === "tool_call_start" && d.call_id) P.tool(d.call_id, d.name, m);
      else if (d.kind === "tool_call_delta" && d.call_id) m.args.set(d.call_id, (m.args.get(d.call_id) || "") + d.text);
      P.paint(m);
    },
    "thread.message.reset": (e) => {
      const m = P.assistant(e.message_id);
      m.textBuf = "";
      m.thinkingBuf = "";
      m.args.clear();
      for (const card of m.tools.querySelectorAll(".tool")) S.tools.delete(card.dataset.callId);
      fill(m.tools);
      m.bubble.classList.add("typing");
      P.paint(m);
      m.node.before(el("div", { class: "note warn", text: `attempt ${e.attempt - 1} failed${e.reason ? `: ${e.reason}` : ""}; retrying` }));
    },
    "thread.message.completed": (e) => { P.completeMessage(P.assistant(e.message_id), e.message); P.refreshSoon(); },
    "thread.run.step.tool_call.created": (e) => { P.tool(e.call_id, e.name, S.msgs.get(e.message_id)); },
    "thread.run.step.tool_call.completed_by_llm": (e) => P.setArgs(P.tool(e.call.id, e.call.name), e.call.arguments, e.call.arguments_error),
    "agent.tool.approval.requested": (e) => {
      S.pending.set(e.approval.call_id, e.approval);
      P.toolState(P.tool(e.approval.call_id, e.approval.tool_name), "waiting", "awaiting approval");
      P.renderWaiting();
    },
    "agent.tool.approval.resolved": (e) => {
      S.pending.delete(e.call_id);
      P.renderWaiting();
      const t = P.tool(e.call_id);
      P.toolState(t, e.decision === "approve" ? "running" : "", e.decision === "approve" ? "approved" : e.decision);
      t.extra.append(el("div", { class: "decided", text: `${e.decision}${e.by ? ` by ${e.by}` : ""}${e.reason ? `: ${e.reason}` : ""}` }));
    },
    "thread.run.requires_action": (e) => {
      for (const a of e.actions) {
        S.actions.set(a.call_id, a);
        P.toolState(P.tool(a.call_id, a.tool_name), "waiting", "awaiting output");
      }
      P.renderWaiting();
    },
    "agent.tool.execution.started": (e) => {
      if (S.actions.delete(e.call.id)) P.renderWaiting();
      P.toolState(P.tool(e.call.id, e.call.name), "running", "running");
    },
    "agent.tool.execution.completed": (e) => { P.toolResult(P.tool(e.result.id, e.result.name), e.result, e.ran, e.latency_ms); P.refreshSoon(); },
    "agent.sub_agent.invocation.started": (e) => {
      const t = P.tool(e.call_id, e.name);
      t.extra.append(el("div", { class: "sub-link" }, "sub-agent run ", el("a", { href: `/runs/${enc(e.child_run_id)}`, text: e.child_run_id })));
      P.refreshSoon();
    },
    "agent.sub_agent.invocation.completed": () => P.refreshSoon(),
    "agent.context.compacted": (e) => P.note(`context ${e.kind === "summary" ? "summarised" : "pruned"}: ${fmtInt(e.tokens_before)} → ${fmtInt(e.tokens_after)} tokens`),
    "agent.guardrail.triggered": (e) => P.note(`guardrail ${e.name} (${e.stage}${e.tripwire ? ", tripwire" : ""}): ${e.reason}`, e.tripwire ? "bad" : "warn"),
    "agent.run.tool_removed": (e) => P.note(e.message || `tool ${e.tool} removed`, "warn"),
    "agent.run.tool_added": (e) => P.note(e.message || `tool ${e.tool} added`),
    "agent.run.quota.waiting": (e) => P.note(`waiting for quota until ${e.until}: ${e.message || ""}`),
    "agent.run.continued": (e) => P.note(`continued as new (hand-over ${e.runs})`),
    "agent.thread.message.received": (e) => P.userMsg(e.text, e.turn ? `User · turn ${e.turn}` : "User", e.by),
    "agent.turn.ended": (e) => {
      if (e.status !== "completed") P.note(`turn ${e.turn} ${e.status}${e.error ? `: ${e.error}` : ""}`, e.status === "failed" ? "bad" : "warn");
      for (const m of S.msgs.values()) m.bubble.classList.remove("typing");
      P.refreshSoon();
    },
    "agent.turn.interrupted": (e) => P.note(`turn ${e.turn} interrupted by turn ${e.by_turn}`, "warn"),
    "agent.turn.rolled_back": (e) => P.note(`turn ${e.turn} rolled back for turn ${e.by_turn} (${e.discarded} messages discarded)`, "warn"),
    "agent.run.steered": (e) => (e.texts || []).forEach((t) => P.userMsg(t, "Steering")),
    "thread.run.completed": (e) => P.end(e.status || "completed", e.note || (e.reason && e.reason !== "done" ? `reason: ${e.reason}` : "")),
    "thread.run.failed": (e) => P.end("failed", `${e.reason}: ${e.error}`),
    "thread.run.cancelled": () => P.end("cancelled", ""),
  };
}
