// The thread page's box: send the next message, or steer the turn under way.

import { enc, el, toast, toastError } from "./dom.js";
import { api } from "./api.js";

export function composer(threadId) {
  const text = el("textarea", { name: "message", id: "message", rows: "2", placeholder: "Send the next message…", "aria-label": "Message" });
  const strategy = el("select", { name: "strategy", "aria-label": "If the thread is busy" },
    el("option", { value: "", text: "If busy: the thread's default" }),
    el("option", { value: "enqueue", text: "If busy: queue it" }),
    el("option", { value: "interrupt", text: "If busy: interrupt" }),
    el("option", { value: "rollback", text: "If busy: roll back the turn" }),
    el("option", { value: "reject", text: "If busy: refuse" }));
  const send = el("button", { type: "submit", class: "primary", id: "send", text: "Send" });
  const steer = el("button", { type: "button", id: "steer", title: "Add it to the turn under way, before the model's next step", text: "Steer" });
  const form = el("form", {}, text,
    el("div", { class: "row" }, strategy, el("span", { class: "hint", text: "Enter sends · Shift+Enter for a new line" }), steer, send));
  async function post(path, body, done) {
    if (!text.value.trim()) { text.focus(); return; }
    send.disabled = steer.disabled = true;
    try {
      const answer = await api(`/v1/threads/${enc(threadId)}/${path}`, { method: "POST", body });
      text.value = "";
      toast(done(answer || {}));
    } catch (err) {
      toastError(err);
    } finally {
      send.disabled = steer.disabled = false;
      text.focus();
    }
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const body = { text: text.value };
    if (strategy.value) body.strategy = strategy.value;
    post("messages", body, (a) => `Sent${a.turn ? ` (turn ${a.turn})` : ""}`);
  });
  steer.addEventListener("click", () => post("steer", { text: text.value }, () => "Steering message sent"));
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
  });
  return el("div", { class: "composer" }, form);
}
