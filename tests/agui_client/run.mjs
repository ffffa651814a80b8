// Drives agentloop's AG-UI endpoint with the official @ag-ui/client HttpAgent.
//
//   node run.mjs URL THREAD_ID MESSAGE [RESUME]
//
// URL is the agent's endpoint (http://127.0.0.1:PORT/v1/ag-ui/NAME). The
// script sends MESSAGE on thread THREAD_ID. When the run ends with
// interrupts, RESUME says how it goes on:
//   approve   resume at once, each interrupt answered {decision: "approve"}
//   answered  print {"kind":"waiting"}, wait for a line on stdin (the test
//             decides through the JSON API meanwhile), then resume with
//             entries that carry no payload
// Every line printed is one JSON object: "event" (each event the client
// accepted, after its schema enforcement and sequence verification),
// "warning" (anything the client warned about, e.g. material it stripped),
// "finished" (a run's outcome), "waiting", "error", and last "done" with the
// agent's messages. Exit status 0 when every run completed without error.
import { HttpAgent } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";
import { createInterface } from "node:readline";

const [url, threadId, message, resumeMode] = process.argv.slice(2);
const print = (kind, fields) => process.stdout.write(JSON.stringify({ kind, ...fields }) + "\n");

for (const level of ["warn", "error"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    print("warning", { level, text: args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ") });
    original(...args);
  };
}

const agent = new HttpAgent({ url, threadId });
agent.addMessage({ id: "user-1", role: "user", content: message });

let runs = 0;
async function runOnce(parameters) {
  runs += 1;
  const run = runs;
  let outcome = null;
  await agent.runAgent(parameters, {
    onEvent({ event }) {
      // The client validated it already; parse it again with the protocol's
      // schema, so a lax client path could not hide an invalid event.
      const checked = EventSchema.safeParse(event);
      if (!checked.success) print("error", { message: `schema: ${checked.error.message}`, event });
      print("event", { run, event });
    },
    onRunFinishedEvent(params) {
      outcome = { outcome: params.outcome, interrupts: params.interrupts ?? [], result: params.event.result ?? null };
      print("finished", { run, ...outcome });
    },
    onRunErrorEvent({ event }) {
      print("finished", { run, outcome: "error", message: event.message });
    },
  });
  return outcome;
}

async function waitForLine() {
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    lines.close();
    return line;
  }
  return null;
}

try {
  let outcome = await runOnce({ runId: "agui-run-1" });
  let guard = 0;
  while (outcome && outcome.outcome === "interrupt" && guard++ < 5) {
    let resume;
    if (resumeMode === "approve") {
      resume = outcome.interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { decision: "approve" } }));
    } else if (resumeMode === "answered") {
      print("waiting", { interrupts: outcome.interrupts });
      await waitForLine();
      resume = outcome.interrupts.map((i) => ({ interruptId: i.id, status: "resolved" }));
    } else {
      break;
    }
    outcome = await runOnce({ runId: `agui-run-${runs + 1}`, resume });
  }
  print("done", { messages: agent.messages, pendingInterrupts: agent.pendingInterrupts });
  process.exit(outcome && outcome.outcome === "success" ? 0 : 3);
} catch (err) {
  print("error", { message: String(err && err.message ? err.message : err) });
  process.exit(2);
}
