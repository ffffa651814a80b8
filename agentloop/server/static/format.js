// Formatting: numbers, costs, durations, times, status badges, JSON and Markdown as HTML.

import { el, esc } from "./dom.js";

export const LIVE = new Set(["running", "idle", "awaiting_approval", "requires_action", "waiting_for_quota"]);
export const WAITING = ["awaiting_approval", "requires_action"];
export const STATUS_TEXT = {
  running: "running", idle: "idle", awaiting_approval: "awaiting approval", requires_action: "requires action",
  waiting_for_quota: "waiting for quota",
  completed: "completed", failed: "failed", cancelled: "cancelled", stopped: "stopped",
  terminated: "terminated", timed_out: "timed out", continued: "continued",
};


export function fmtInt(n) { return Number(n || 0).toLocaleString("en-US"); }

export function fmtCost(usd) {
  if (usd == null) return "—";
  if (usd === 0) return "$0.00";
  // Two significant digits below a cent ($0.0018), cents above.
  return "$" + (usd < 0.01 ? usd.toFixed(Math.min(8, 1 - Math.floor(Math.log10(usd)))) : usd.toFixed(2));
}

export function fmtDuration(ms) {
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

export function fmtAgo(when) {
  if (!when) return "—";
  const seconds = (new Date(when).getTime() - Date.now()) / 1000;
  const abs = Math.abs(seconds);
  if (abs < 45) return "just now";
  if (abs < 3600) return relative.format(Math.round(seconds / 60), "minute");
  if (abs < 86400) return relative.format(Math.round(seconds / 3600), "hour");
  if (abs < 86400 * 30) return relative.format(Math.round(seconds / 86400), "day");
  return new Date(when).toLocaleDateString();
}

export function fmtWhen(when) { return when ? new Date(when).toLocaleString() : "—"; }

export function badge(status) {
  return el("span", { class: `badge ${status || ""}`, "data-status": status || "", text: STATUS_TEXT[status] || status || "unknown" });
}

export function short(id, n = 18) { return id && id.length > n ? id.slice(0, n - 1) + "…" : id || ""; }

// JSON with its keys, strings, numbers and literals marked for colour.
const JSON_TOKEN = /("(?:\\.|[^"\\])*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|\b(true|false|null)\b/g;

export function jsonHtml(value) {
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

export function jsonBlock(value, cls = "json") { return el("pre", { class: cls, html: jsonHtml(value) }); }

export function parseJson(text) {
  const t = (text || "").trim();
  if (!(t.startsWith("{") || t.startsWith("["))) return undefined;
  try { return JSON.parse(t); } catch { return undefined; }
}

// A tool's output: JSON pretty-printed, anything else as preformatted text.
export function outputBlock(text) {
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

export function markdown(source) {
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
