// A run's or a thread's page, live: its layout, its status, the run's event stream from the API, the end.

import { app, enc, el, fill, toastError } from "./dom.js";
import { badge } from "./format.js";
import { token, api } from "./api.js";
import { composer } from "./composer.js";
import { conversation } from "./run-conversation.js";
import { eventHandlers } from "./run-events.js";
import { sideCards } from "./run-side.js";
import { waitingView } from "./run-waiting.js";

export function runPage(runId, isThread) {
  const S = {
    runId, lastSeq: -1, ended: false, status: "", es: null,
    msgs: new Map(), tools: new Map(), pending: new Map(), actions: new Map(),
    state: null, report: null, tree: new Map(),
  };
  const title = el("h1", { text: isThread ? `Thread ${runId}` : "Run" });
  const statusBadge = el("span", {}, badge(""));
  const live = el("span", { class: "live", text: "connecting" });
  const sub = el("div", { class: "page-sub" }, isThread ? null : el("span", { class: "mono", title: "run id", text: runId }));
  const waiting = el("section", { class: "waiting", id: "waiting", hidden: true, "aria-live": "polite" });
  const conv = el("div", { class: "conversation", id: "conversation" });
  const ending = el("div", { id: "ending" });
  const main = el("div", { class: "main" }, waiting, conv, ending);
  const side = el("aside", { class: "side" });
  fill(app,
    el("div", { class: "page-head" }, title, statusBadge, live),
    sub,
    el("div", { class: "run-layout" }, main, side),
  );
  if (isThread) main.append(composer(runId));

  // Side cards, filled by renderFacts.
  const costCard = el("section", { class: "card", id: "usage" }, el("h2", { text: "Usage and cost" }), el("div", { class: "card-body" }));
  const factsCard = el("section", { class: "card", id: "details" }, el("h2", { text: "Run" }), el("div", { class: "card-body" }));
  const treeCard = el("section", { class: "card", id: "sub-agents", hidden: true }, el("h2", { text: "Sub-agents" }), el("div", { class: "card-body" }));
  const actionsCard = el("section", { class: "card", id: "controls", hidden: true }, el("h2", { text: "Control" }), el("div", { class: "card-body" }));
  side.append(costCard, factsCard, treeCard, actionsCard);

  // The page: its state, its elements and each part's functions; the parts call each other through it.
  const P = { S, runId, isThread, title, waiting, conv, costCard, factsCard, treeCard, actionsCard };
  Object.assign(P, { stick, setStatus, setLive, end }, conversation(P), waitingView(P), sideCards(P));
  const handlers = eventHandlers(P);

  // --- scrolling: follow the bottom while the reader is there
  // (a thread's page, like a chat; a run's page once the reader scrolled down to the end)
  const nearBottom = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 160;
  function stick(fn) {
    const follow = S.following && nearBottom() && (isThread || window.scrollY > 0);
    fn();
    if (follow) window.scrollTo(0, document.documentElement.scrollHeight);
  }

  function setStatus(status) {
    if (!status) return;
    S.status = status;
    fill(statusBadge, badge(status));
    P.renderControls();
  }

  function setLive(on, text) {
    live.classList.toggle("on", on);
    live.textContent = text || (on ? "live" : "offline");
  }

  function onEvent(e) {
    if (e.seq != null) {
      if (e.seq <= S.lastSeq) return; // already shown (a reconnect that overlapped)
      S.lastSeq = e.seq;
    }
    const handle = handlers[e.type];
    if (handle) stick(() => handle(e));
  }

  function end(status, detail) {
    S.ended = true;
    if (S.es) S.es.close();
    setLive(false, "ended");
    setStatus(status);
    S.pending.clear();
    S.actions.clear();
    P.renderWaiting();
    for (const m of S.msgs.values()) m.bubble.classList.remove("typing");
    const words = { completed: "Completed", stopped: "Stopped", failed: "Failed", cancelled: "Cancelled" };
    fill(ending, el("div", { class: `ending ${status}`, id: "run-ended", "data-status": status },
      badge(status), el("span", { class: "what", text: `Run ${words[status] ? words[status].toLowerCase() : status}` }),
      detail ? el("span", { class: "detail", text: detail }) : null));
    P.refreshSoon();
  }

  function follow() {
    const q = new URLSearchParams();
    if (S.lastSeq >= 0) q.set("from", String(S.lastSeq + 1));
    if (token.get()) q.set("access_token", token.get());
    const es = new EventSource(`/v1/runs/${enc(runId)}/events${q.toString() ? `?${q}` : ""}`);
    S.es = es;
    es.onopen = () => setLive(true);
    es.onmessage = (m) => {
      let event;
      try { event = JSON.parse(m.data); } catch { return; }
      onEvent(event);
    };
    es.onerror = async () => {
      if (S.ended) { es.close(); return; }
      setLive(false, es.readyState === EventSource.CONNECTING ? "reconnecting" : "offline");
      if (es.readyState !== EventSource.CLOSED) return; // the browser reconnects (Last-Event-ID) on its own
      es.close();
      try {
        await api(`/v1/runs/${enc(runId)}`);
        setTimeout(() => { if (!S.ended) follow(); }, 2000);
      } catch (err) {
        toastError(err);
      }
    };
  }

  // --- start: the facts, then the events from the beginning, live
  (async () => {
    const problem = await P.loadFacts();
    if (problem && problem.status === 404) {
      setLive(false, "");
      fill(app, el("div", { class: "error-box", id: "problem", text: problem.message }),
        el("p", {}, el("a", { href: "/", text: "← all runs" })));
      return;
    }
    if (problem && problem.status === 401) return;
    if (isThread && S.state && !S.state.thread_id) {
      main.prepend(el("p", { class: "note warn", text: `run ${runId} is not a thread: messages sent here are refused` }));
    }
    S.following = true;
    follow();
  })();
}
