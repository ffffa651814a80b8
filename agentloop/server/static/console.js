// agentloop console: plain JavaScript, no build step, no dependencies.
// Every page is a shell; this script fills it from the JSON API (/v1) and a
// run's Server-Sent Events, as any other client of the API would.
"use strict";

(() => {
  const D = document.body.dataset;
  const app = document.getElementById("app");
  const TOKEN_KEY = "agentloop.console.token";
  const TERMINAL = new Set(["thread.run.completed", "thread.run.failed", "thread.run.cancelled"]);
  const LIVE = new Set(["running", "idle", "awaiting_approval", "requires_action"]);
  const WAITING = ["awaiting_approval", "requires_action"];
  const STATUS_TEXT = {
    running: "running", idle: "idle", awaiting_approval: "awaiting approval", requires_action: "requires action",
    completed: "completed", failed: "failed", cancelled: "cancelled", stopped: "stopped",
    terminated: "terminated", timed_out: "timed out", continued: "continued",
  };
  const enc = encodeURIComponent;

  // ---------------------------------------------------------------- DOM helpers

  function el(tag, props, ...kids) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value == null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key === "html") node.innerHTML = value; // only ever our own escaped markup
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const kid of kids.flat()) {
      if (kid != null && kid !== false) node.append(kid instanceof Node ? kid : String(kid));
    }
    return node;
  }

  // Replace a node's children, leaving out the null and false of optional parts.
  function fill(node, ...kids) {
    node.replaceChildren(...kids.flat().filter((k) => k != null && k !== false));
  }

  function esc(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  function toast(text, kind = "info") {
    const box = document.getElementById("toasts");
    const close = el("button", { type: "button", "aria-label": "Dismiss", text: "✕" });
    const node = el("div", { class: `toast ${kind}` }, el("span", { text }), close);
    close.addEventListener("click", () => node.remove());
    box.append(node);
    setTimeout(() => node.remove(), kind === "error" ? 12000 : 5000);
  }

  function toastError(err) {
    if (err && err.status === 401) return; // the token prompt says it
    toast(err && err.message ? err.message : String(err), "error");
  }

  // ---------------------------------------------------------------- formatting

  function fmtInt(n) { return Number(n || 0).toLocaleString("en-US"); }

  function fmtCost(usd) {
    if (usd == null) return "—";
    if (usd === 0) return "$0.00";
    // Two significant digits below a cent ($0.0018), cents above.
    return "$" + (usd < 0.01 ? usd.toFixed(Math.min(8, 1 - Math.floor(Math.log10(usd)))) : usd.toFixed(2));
  }

  function fmtDuration(ms) {
    if (ms == null || isNaN(ms)) return "—";
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const s = ms / 1000;
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${String(Math.round(s % 60)).padStart(2, "0")} s`;
    const h = Math.floor(m / 60);
    if (h < 48) return `${h} h ${String(m % 60).padStart(2, "0")} min`;
    return `${Math.floor(h / 24)} d ${h % 24} h`;
  }

  const relative = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

  function fmtAgo(when) {
    if (!when) return "—";
    const seconds = (new Date(when).getTime() - Date.now()) / 1000;
    const abs = Math.abs(seconds);
    if (abs < 45) return "just now";
    if (abs < 3600) return relative.format(Math.round(seconds / 60), "minute");
    if (abs < 86400) return relative.format(Math.round(seconds / 3600), "hour");
    if (abs < 86400 * 30) return relative.format(Math.round(seconds / 86400), "day");
    return new Date(when).toLocaleDateString();
  }

  function fmtWhen(when) { return when ? new Date(when).toLocaleString() : "—"; }

  function badge(status) {
    return el("span", { class: `badge ${status || ""}`, "data-status": status || "", text: STATUS_TEXT[status] || status || "unknown" });
  }

  function short(id, n = 18) { return id && id.length > n ? id.slice(0, n - 1) + "…" : id || ""; }

  // JSON with its keys, strings, numbers and literals marked for colour.
  const JSON_TOKEN = /("(?:\\.|[^"\\])*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|\b(true|false|null)\b/g;

  function jsonHtml(value) {
    const text = JSON.stringify(value, null, 2) ?? "null";
    let out = "";
    let last = 0;
    for (const m of text.matchAll(JSON_TOKEN)) {
      out += esc(text.slice(last, m.index));
      if (m[1]) out += m[2] ? `<span class="k">${esc(m[1])}</span>${esc(m[2])}` : `<span class="s">${esc(m[1])}</span>`;
      else if (m[3]) out += `<span class="n">${m[3]}</span>`;
      else out += `<span class="l">${m[4]}</span>`;
      last = m.index + m[0].length;
    }
    return out + esc(text.slice(last));
  }

  function jsonBlock(value, cls = "json") { return el("pre", { class: cls, html: jsonHtml(value) }); }

  function parseJson(text) {
    const t = (text || "").trim();
    if (!(t.startsWith("{") || t.startsWith("["))) return undefined;
    try { return JSON.parse(t); } catch { return undefined; }
  }

  // A tool's output: JSON pretty-printed, anything else as preformatted text.
  function outputBlock(text) {
    const value = parseJson(text);
    return value === undefined ? el("pre", { class: "code wrap", text: text || "(empty)" }) : jsonBlock(value);
  }

  // Markdown, the part models use: fences, headings, lists, quotes, inline code, bold, italics, links.
  function inline(text) {
    return text.split(/(`[^`\n]+`)/g).map((part) => {
      if (part.length > 2 && part.startsWith("`") && part.endsWith("`")) return `<code>${esc(part.slice(1, -1))}</code>`;
      return esc(part)
        .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>')
        .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>")
        .replace(/(^|[^*\w])\*([^*\n]+)\*(?![\w*])/g, "$1<em>$2</em>");
    }).join("");
  }

  function codeHtml(code, lang) {
    const value = lang === "json" || !lang ? parseJson(code) : undefined;
    if (value !== undefined) return `<pre class="json">${jsonHtml(value)}</pre>`;
    return `<pre class="code"><code>${esc(code)}</code></pre>`;
  }

  const LIST_ITEM = /^\s*([-*+]|\d+[.)])\s+/;

  function markdown(source) {
    const whole = parseJson(source);
    if (whole !== undefined) return `<pre class="json">${jsonHtml(whole)}</pre>`;
    const lines = source.replace(/\r\n?/g, "\n").split("\n");
    let html = "";
    let para = [];
    const flush = () => {
      if (para.length) html += `<p>${para.map(inline).join("<br>")}</p>`;
      para = [];
    };
    for (let i = 0; i < lines.length;) {
      const line = lines[i];
      const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)/);
      if (fence) {
        flush();
        const body = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
        i++;
        html += codeHtml(body.join("\n"), fence[2].toLowerCase());
        continue;
      }
      const heading = line.match(/^(#{1,4})\s+(.*)$/);
      if (heading) {
        flush();
        html += `<h${heading[1].length}>${inline(heading[2])}</h${heading[1].length}>`;
        i++;
        continue;
      }
      if (LIST_ITEM.test(line)) {
        flush();
        const tag = /^\s*\d/.test(line) ? "ol" : "ul";
        const items = [];
        for (; i < lines.length && (LIST_ITEM.test(lines[i]) || (/^\s{2,}\S/.test(lines[i]) && items.length)); i++) {
          if (LIST_ITEM.test(lines[i])) items.push(lines[i].replace(LIST_ITEM, ""));
          else items[items.length - 1] += " " + lines[i].trim();
        }
        html += `<${tag}>${items.map((t) => `<li>${inline(t)}</li>`).join("")}</${tag}>`;
        continue;
      }
      if (/^>\s?/.test(line)) {
        flush();
        const quoted = [];
        for (; i < lines.length && /^>\s?/.test(lines[i]); i++) quoted.push(lines[i].replace(/^>\s?/, ""));
        html += `<blockquote>${markdown(quoted.join("\n"))}</blockquote>`;
        continue;
      }
      if (!line.trim()) flush();
      else para.push(line);
      i++;
    }
    flush();
    return html;
  }

  // ---------------------------------------------------------------- the API

  const token = {
    get: () => localStorage.getItem(TOKEN_KEY) || "",
    set: (value) => localStorage.setItem(TOKEN_KEY, value),
    clear: () => localStorage.removeItem(TOKEN_KEY),
  };

  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  async function api(path, { method = "GET", body } = {}) {
    const headers = { Accept: "application/json" };
    const secret = token.get();
    if (secret) headers.Authorization = `Bearer ${secret}`;
    // Every POST is JSON, empty ones too: the server refuses any other (no cross-site form can act).
    if (body !== undefined || method === "POST") headers["Content-Type"] = "application/json";
    let res;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      throw new ApiError(0, `the server did not answer (${err.message}); is agentloop serve still running?`);
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!res.ok) {
      const detail = (data && (data.detail || data.title)) || `${res.status} ${res.statusText}`;
      if (res.status === 401) askForToken(detail);
      throw new ApiError(res.status, detail, data);
    }
    return data;
  }

  function askForToken(problem) {
    const input = el("input", { type: "password", name: "token", autocomplete: "current-password", placeholder: "API token", required: true, "aria-label": "API token" });
    const form = el("form", {},
      el("p", { text: "This server needs an API token: one of the secrets in its AGENTLOOP_API_TOKENS. The console keeps it in this browser's local storage." }),
      problem && token.get() ? el("p", { class: "error-box small", text: problem }) : null,
      input,
      el("div", { class: "actions-row" }, el("button", { type: "submit", class: "primary", text: "Use this token" })),
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      token.set(input.value.trim());
      location.reload();
    });
    fill(app, el("section", { class: "card token-card" }, el("h2", { text: "Sign in" }), el("div", { class: "card-body" }, form)));
    input.focus();
  }

  function setupTokenButton() {
    const button = document.getElementById("token-button");
    if (D.auth !== "1" && !token.get()) return;
    button.hidden = false;
    button.textContent = token.get() ? "Forget token" : "Sign in";
    button.addEventListener("click", () => {
      if (token.get()) {
        token.clear();
        location.reload();
      } else askForToken("");
    });
  }

  async function listRuns({ status, name, limit = 50, pageToken } = {}) {
    const q = new URLSearchParams();
    if (status) q.set("status", status);
    if (name) q.set("name", name);
    q.set("limit", String(limit));
    if (pageToken) q.set("page_token", pageToken);
    const data = await api(`/v1/runs?${q}`);
    if (Array.isArray(data)) return { runs: data, next: null };
    return { runs: data.runs || data.items || [], next: data.next_page_token || null };
  }

  // ---------------------------------------------------------------- the runs list

  const FILTERS = [
    { key: "all", label: "All" },
    { key: "waiting", label: "Waiting on someone" },
    { key: "running", label: "Running" },
    { key: "idle", label: "Idle threads" },
    { key: "completed", label: "Completed" },
    { key: "failed", label: "Failed" },
  ];

  function runRow(run) {
    const row = el("a", { class: "run-row", href: `/runs/${enc(run.run_id)}`, "data-run-id": run.run_id },
      el("span", { class: "status" }, badge(run.status)),
      el("span", { class: "agent", title: run.agent_name || "" }, run.agent_name || el("span", { class: "muted", text: "(unnamed)" }),
        run.parent_run_id ? el("span", { class: "parent", text: `sub-agent of ${short(run.parent_run_id, 28)}` }) : null),
      el("span", { class: "rid", title: run.run_id, text: run.run_id }),
      el("span", { class: "model", title: run.model || "", text: run.model || "" }),
      el("span", { class: "when", title: fmtWhen(run.started_at), text: fmtAgo(run.started_at) }),
      el("span", { class: "dur", text: run.started_at ? fmtDuration(new Date(run.closed_at || Date.now()) - new Date(run.started_at)) : "" }),
    );
    if (run.pending_tools && run.pending_tools.length) {
      row.append(el("span", { class: "pending" },
        el("span", { class: "muted small", text: run.status === "requires_action" ? "outputs for" : "approve" }),
        run.pending_tools.map((t) => el("span", { class: "chip warn", text: t }))));
    }
    return row;
  }

  async function waitingRuns(name) {
    const lists = await Promise.all(WAITING.map((status) => listRuns({ status, name, limit: 100 })));
    const runs = lists.flatMap((l) => l.runs);
    runs.sort((a, b) => String(b.started_at || "").localeCompare(String(a.started_at || "")));
    return runs;
  }

  function runsPage() {
    const params = new URLSearchParams(location.search);
    let filter = FILTERS.some((f) => f.key === params.get("filter")) ? params.get("filter") : "all";
    let name = params.get("name") || "";
    let next = null;
    let pages = 1;
    let loading = false;

    const count = el("span", { class: "count", hidden: true });
    const buttons = FILTERS.map((f) => el("button", {
      type: "button", "data-filter": f.key, "aria-pressed": String(f.key === filter),
      onclick: () => { filter = f.key; load(); },
    }, f.label, f.key === "waiting" ? count : null));
    const search = el("input", { type: "search", class: "search", placeholder: "Agent name", value: name, "aria-label": "Agent name" });
    let typing;
    search.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => { name = search.value.trim(); load(); }, 350);
    });
    const list = el("div", { class: "runs", id: "runs" });
    const more = el("div", { class: "more", hidden: true },
      el("button", { type: "button", text: "Load more", onclick: () => load(true) }));
    fill(app,
      el("div", { class: "page-head" }, el("h1", { text: "Runs" })),
      el("div", { class: "filters" }, el("div", { class: "segmented", role: "group", "aria-label": "Filter runs" }, buttons), search),
      list, more,
    );

    const head = () => el("div", { class: "runs-head" },
      ["Status", "Agent", "Run", "Model", "Started", "Duration"].map((t) => el("span", { text: t })));

    async function countWaiting() {
      try {
        const n = (await waitingRuns(name)).length;
        count.hidden = n === 0;
        count.textContent = String(n);
      } catch { count.hidden = true; }
    }

    async function load(append = false, quiet = false) {
      if (loading) return;
      loading = true;
      buttons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.filter === filter)));
      document.getElementById("nav-waiting").classList.toggle("active", filter === "waiting");
      const q = new URLSearchParams();
      if (filter !== "all") q.set("filter", filter);
      if (name) q.set("name", name);
      history.replaceState(null, "", q.toString() ? `/?${q}` : "/");
      try {
        let runs;
        if (filter === "waiting") {
          runs = await waitingRuns(name);
          next = null;
        } else {
          const page = await listRuns({ status: filter === "all" ? null : filter, name, pageToken: append ? next : null });
          runs = page.runs;
          next = page.next;
        }
        pages = append ? pages + 1 : 1;
        if (!append) fill(list, head());
        runs.forEach((r) => list.append(runRow(r)));
        if (!list.querySelector(".run-row")) {
          list.append(el("div", { class: "empty" }, filter === "waiting"
            ? "No run waits on anyone."
            : el("span", {}, "No runs here yet. Start one with ", el("code", { text: "agentloop run" }), " or ", el("code", { text: "POST /v1/runs" }), ".")));
        }
        more.hidden = !next;
      } catch (err) {
        if (!quiet) toastError(err);
        if (!append && !quiet) fill(list, el("div", { class: "empty error-box", text: err.message }));
      } finally {
        loading = false;
      }
      countWaiting();
    }

    load();
    setInterval(() => { if (!document.hidden && pages === 1) load(false, true); }, 5000);
  }

  // ---------------------------------------------------------------- a run, live

  function runPage(runId, isThread) {
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
      renderControls();
    }

    function setLive(on, text) {
      live.classList.toggle("on", on);
      live.textContent = text || (on ? "live" : "offline");
    }

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
        stick(() => {
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

    // --- events
    const handlers = {
      "agent.run.created": (e) => {
        S.agentName = e.agent_name;
        if (!isThread) title.textContent = e.agent_name || "Run";
        for (const m of e.input || []) {
          const text = (m.content || []).filter((p) => p.type === "text").map((p) => p.text).join("");
          if (m.role === "user" && text) userMsg(text);
          else if (m.role === "assistant" && text) {
            const a = assistant(`input-${conv.children.length}`);
            a.textBuf = text;
            a.bubble.classList.remove("typing");
            paint(a);
          }
        }
      },
      "agent.run.status.changed": (e) => setStatus(e.status),
      "thread.message.created": (e) => { assistant(e.message_id); },
      "thread.message.delta": (e) => {
        const m = assistant(e.message_id);
        const d = e.delta;
        if (d.kind === "text") m.textBuf += d.text;
        else if (d.kind === "thinking") m.thinkingBuf += d.text;
        else if (d.kind === "tool_call_start" && d.call_id) tool(d.call_id, d.name, m);
        else if (d.kind === "tool_call_delta" && d.call_id) m.args.set(d.call_id, (m.args.get(d.call_id) || "") + d.text);
        paint(m);
      },
      "thread.message.reset": (e) => {
        const m = assistant(e.message_id);
        m.textBuf = "";
        m.thinkingBuf = "";
        m.args.clear();
        for (const card of m.tools.querySelectorAll(".tool")) S.tools.delete(card.dataset.callId);
        fill(m.tools);
        m.bubble.classList.add("typing");
        paint(m);
        m.node.before(el("div", { class: "note warn", text: `attempt ${e.attempt - 1} failed${e.reason ? `: ${e.reason}` : ""}; retrying` }));
      },
      "thread.message.completed": (e) => { completeMessage(assistant(e.message_id), e.message); refreshSoon(); },
      "thread.run.step.tool_call.created": (e) => { tool(e.call_id, e.name, S.msgs.get(e.message_id)); },
      "thread.run.step.tool_call.completed_by_llm": (e) => setArgs(tool(e.call.id, e.call.name), e.call.arguments, e.call.arguments_error),
      "agent.tool.approval.requested": (e) => {
        S.pending.set(e.approval.call_id, e.approval);
        toolState(tool(e.approval.call_id, e.approval.tool_name), "waiting", "awaiting approval");
        renderWaiting();
      },
      "agent.tool.approval.resolved": (e) => {
        S.pending.delete(e.call_id);
        renderWaiting();
        const t = tool(e.call_id);
        toolState(t, e.decision === "approve" ? "running" : "", e.decision === "approve" ? "approved" : e.decision);
        t.extra.append(el("div", { class: "decided", text: `${e.decision}${e.by ? ` by ${e.by}` : ""}${e.reason ? `: ${e.reason}` : ""}` }));
      },
      "thread.run.requires_action": (e) => {
        for (const a of e.actions) {
          S.actions.set(a.call_id, a);
          toolState(tool(a.call_id, a.tool_name), "waiting", "awaiting output");
        }
        renderWaiting();
      },
      "agent.tool.execution.started": (e) => {
        if (S.actions.delete(e.call.id)) renderWaiting();
        toolState(tool(e.call.id, e.call.name), "running", "running");
      },
      "agent.tool.execution.completed": (e) => { toolResult(tool(e.result.id, e.result.name), e.result, e.ran, e.latency_ms); refreshSoon(); },
      "agent.sub_agent.invocation.started": (e) => {
        const t = tool(e.call_id, e.name);
        t.extra.append(el("div", { class: "sub-link" }, "sub-agent run ", el("a", { href: `/runs/${enc(e.child_run_id)}`, text: e.child_run_id })));
        refreshSoon();
      },
      "agent.sub_agent.invocation.completed": () => refreshSoon(),
      "agent.context.compacted": (e) => note(`context ${e.kind === "summary" ? "summarised" : "pruned"}: ${fmtInt(e.tokens_before)} → ${fmtInt(e.tokens_after)} tokens`),
      "agent.guardrail.triggered": (e) => note(`guardrail ${e.name} (${e.stage}${e.tripwire ? ", tripwire" : ""}): ${e.reason}`, e.tripwire ? "bad" : "warn"),
      "agent.run.tool_removed": (e) => note(e.message || `tool ${e.tool} removed`, "warn"),
      "agent.run.tool_added": (e) => note(e.message || `tool ${e.tool} added`),
      "agent.run.continued": (e) => note(`continued as new (hand-over ${e.runs})`),
      "agent.thread.message.received": (e) => userMsg(e.text, e.turn ? `User · turn ${e.turn}` : "User", e.by),
      "agent.turn.ended": (e) => {
        if (e.status !== "completed") note(`turn ${e.turn} ${e.status}${e.error ? `: ${e.error}` : ""}`, e.status === "failed" ? "bad" : "warn");
        for (const m of S.msgs.values()) m.bubble.classList.remove("typing");
        refreshSoon();
      },
      "agent.turn.interrupted": (e) => note(`turn ${e.turn} interrupted by turn ${e.by_turn}`, "warn"),
      "agent.turn.rolled_back": (e) => note(`turn ${e.turn} rolled back for turn ${e.by_turn} (${e.discarded} messages discarded)`, "warn"),
      "agent.run.steered": (e) => (e.texts || []).forEach((t) => userMsg(t, "Steering")),
      "thread.run.completed": (e) => end(e.status || "completed", e.note || (e.reason && e.reason !== "done" ? `reason: ${e.reason}` : "")),
      "thread.run.failed": (e) => end("failed", `${e.reason}: ${e.error}`),
      "thread.run.cancelled": () => end("cancelled", ""),
    };

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
      renderWaiting();
      for (const m of S.msgs.values()) m.bubble.classList.remove("typing");
      const words = { completed: "Completed", stopped: "Stopped", failed: "Failed", cancelled: "Cancelled" };
      fill(ending, el("div", { class: `ending ${status}`, id: "run-ended", "data-status": status },
        badge(status), el("span", { class: "what", text: `Run ${words[status] ? words[status].toLowerCase() : status}` }),
        detail ? el("span", { class: "detail", text: detail }) : null));
      refreshSoon();
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
      if (S.state && S.state.status && (!S.ended || !LIVE.has(S.state.status))) setStatus(S.state.status);
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

    // --- start: the facts, then the events from the beginning, live
    (async () => {
      const problem = await loadFacts();
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

  // The thread page's box: send the next message, or steer the turn under way.
  function composer(threadId) {
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

  // ---------------------------------------------------------------- start

  setupTokenButton();
  if (D.auth === "1" && !token.get()) askForToken("");
  else if (D.page === "runs") runsPage();
  else if (D.page === "run") runPage(D.id, false);
  else if (D.page === "thread") runPage(D.id, true);
})();
