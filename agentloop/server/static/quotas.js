// A tenant's spend quota (/quotas/{tenant}): its limits, window, spend and the runs holding reservations.

import { app, el, enc, fill, toastError } from "./dom.js";
import { fmtInt, fmtCost, fmtWhen } from "./format.js";
import { api } from "./api.js";

function amount(a, limits) {
  const parts = [];
  if (limits.tokens != null) parts.push(`${fmtInt(a.tokens)} tokens`);
  if (limits.usd != null) parts.push(fmtCost(a.usd || 0));
  return parts.join(" · ");
}

function row(label, value) {
  return el("div", { class: "fact" }, el("span", { class: "muted", text: label }), el("span", { text: value }));
}

export async function quotaPage(tenant) {
  fill(app, el("h1", { text: `Quota of ${tenant}` }), el("p", { class: "muted", text: "loading…" }));
  let view;
  try {
    view = await api(`/v1/quotas/${enc(tenant)}`);
  } catch (err) {
    fill(app, el("h1", { text: `Quota of ${tenant}` }), el("p", { class: "notice", text: err.message }));
    if (err.status !== 404) toastError(err);
    return;
  }
  const limits = view.limits || {};
  const limit = amount({ tokens: limits.tokens, usd: limits.usd }, limits);
  const holders = Object.entries(view.holders || {});
  fill(app,
    el("h1", { text: `Quota of ${tenant}` }),
    el("section", { class: "facts", id: "quota" },
      row("limit", `${limit} per ${limits.window_seconds}s (at the limit: ${limits.at_limit})`),
      row("window", `${fmtWhen(view.window_start)} to ${fmtWhen(view.window_end)}`),
      row("spent", amount(view.spent, limits)),
      row("reserved", `${amount(view.reserved, limits)} by ${holders.length} run(s)`)),
    el("section", { class: "holders" },
      holders.map(([run, left]) => el("div", { class: "fact" },
        el("a", { href: `/runs/${enc(run)}`, text: run }), el("span", { text: amount(left, limits) })))));
}
