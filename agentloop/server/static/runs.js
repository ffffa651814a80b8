// The runs list (/): runs by status and name, the waiting ones first when asked.

import { app, enc, el, fill, toastError } from "./dom.js";
import { WAITING, fmtDuration, fmtAgo, fmtWhen, badge, short } from "./format.js";
import { listRuns } from "./api.js";

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

export function runsPage() {
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
