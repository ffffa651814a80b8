// A run's conversation: the user's and the model's messages, live, and the tool calls' cards.

import { el, fill } from "./dom.js";
import { fmtDuration, jsonHtml, outputBlock, markdown } from "./format.js";

export function conversation(P) {
  const { S, conv } = P;

  // --- messages
  function userMsg(text, label, by) {
    conv.append(el("div", { class: "msg user" },
      el("div", { class: "msg-role" }, label || "User", by ? el("span", { class: "by", text: `by ${by}` }) : null),
      el("div", { class: "bubble prose", html: markdown(text) })));
  }

  function note(text, kind = "") { conv.append(el("div", { class: `note ${kind}`, text })); }

  function assistant(id) {
    let m = S.msgs.get(id);
    if (m) return m;
    const thinkingText = el("div", { class: "prose" });
    const thinking = el("details", { class: "thinking", hidden: true, open: true }, el("summary", { text: "Thinking" }), thinkingText);
    const text = el("div", { class: "prose text" });
    const tools = el("div", { class: "tools" });
    const bubble = el("div", { class: "bubble typing" }, thinking, text, tools);
    const node = el("div", { class: "msg assistant", "data-message-id": id }, el("div", { class: "msg-role", text: S.agentName || "Assistant" }), bubble);
    conv.append(node);
    m = { id, node, bubble, thinking, thinkingText, text, tools, textBuf: "", thinkingBuf: "", args: new Map(), frame: 0 };
    S.msgs.set(id, m);
    S.lastMsg = m;
    return m;
  }

  function paint(m) {
    if (m.frame) return;
    m.frame = requestAnimationFrame(() => {
      m.frame = 0;
      P.stick(() => {
        m.text.innerHTML = markdown(m.textBuf);
        m.thinking.hidden = !m.thinkingBuf;
        m.thinkingText.innerHTML = markdown(m.thinkingBuf);
        for (const [callId, raw] of m.args) {
          const t = S.tools.get(callId);
          if (t && !t.final) { t.argsPre.className = "code wrap"; t.argsPre.textContent = raw; }
        }
      });
    });
  }

  function completeMessage(m, message) {
    const texts = message.content.filter((p) => p.type === "text").map((p) => p.text).join("");
    const thoughts = message.content.filter((p) => p.type === "thinking").map((p) => p.text).join("\n\n");
    m.textBuf = texts;
    m.thinkingBuf = thoughts;
    m.bubble.classList.remove("typing");
    if (m.thinkingBuf) m.thinking.open = false;
    for (const part of message.content) {
      if (part.type === "tool_call") setArgs(tool(part.id, part.name, m), part.arguments, part.arguments_error);
    }
    paint(m);
  }

  // --- tool calls
  function tool(callId, name, m) {
    let t = S.tools.get(callId);
    if (t) {
      if (name && !t.name) { t.name = name; t.nameEl.textContent = name; }
      return t;
    }
    const nameEl = el("span", { class: "name", text: name || "tool" });
    const stateEl = el("span", { class: "tool-state", text: "called" });
    const argsPre = el("pre", { class: "json", text: "" });
    const extra = el("div");
    const result = el("div", { class: "tool-section result", hidden: true });
    const card = el("div", { class: "tool", "data-call-id": callId },
      el("div", { class: "tool-head" }, nameEl, el("span", { class: "id", text: callId }), el("span", { class: "space" }), stateEl),
      el("div", { class: "tool-section" }, el("div", { class: "label", text: "Arguments" }), argsPre),
      extra, result);
    const host = m || S.lastMsg;
    (host ? host.tools : conv).append(card);
    t = { callId, name, nameEl, stateEl, argsPre, extra, result, card, final: false };
    S.tools.set(callId, t);
    return t;
  }

  function setArgs(t, args, problem) {
    t.final = true;
    t.argsPre.className = "json";
    t.argsPre.innerHTML = jsonHtml(args || {});
    if (problem) t.extra.append(el("div", { class: "decided", text: `arguments not valid JSON: ${problem}` }));
  }

  function toolState(t, cls, text) {
    t.stateEl.className = `tool-state ${cls}`;
    t.stateEl.textContent = text;
  }

  function toolResult(t, result, ran, latency) {
    t.result.hidden = false;
    t.result.classList.toggle("error", !!result.is_error);
    const lines = (result.content || "").split("\n").length;
    fill(t.result,
      el("div", { class: "label", text: `Result${lines > 1 ? ` · ${lines} lines` : ""}${latency ? ` · ${fmtDuration(latency)}` : ""}${ran ? "" : " · not run"}` }),
      outputBlock(result.content));
    toolState(t, result.is_error ? "error" : "ok", result.is_error ? "error" : ran ? "done" : "answered");
  }

  return { userMsg, note, assistant, paint, completeMessage, tool, setArgs, toolState, toolResult };
}
