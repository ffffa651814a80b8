// The JSON API (/v1): the token the console keeps, the calls, their problems.

import { D, app, el, fill } from "./dom.js";

const TOKEN_KEY = "agentloop.console.token";

export const token = {
  get: () => localStorage.getItem(TOKEN_KEY) || "",
  set: (value) => localStorage.setItem(TOKEN_KEY, value),
  clear: () => localStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export async function api(path, { method = "GET", body } = {}) {
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

export function askForToken(problem) {
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

export function setupTokenButton() {
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

export async function listRuns({ status, name, limit = 50, pageToken } = {}) {
  const q = new URLSearchParams();
  if (status) q.set("status", status);
  if (name) q.set("name", name);
  q.set("limit", String(limit));
  if (pageToken) q.set("page_token", pageToken);
  const data = await api(`/v1/runs?${q}`);
  if (Array.isArray(data)) return { runs: data, next: null };
  return { runs: data.runs || data.items || [], next: data.next_page_token || null };
}
