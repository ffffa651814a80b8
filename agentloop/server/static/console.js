// agentloop console: plain JavaScript as native ES modules, no build step, no dependencies.
// Every page is a shell; these modules fill it from the JSON API (/v1) and a
// run's Server-Sent Events, as any other client of the API would.
//
//   dom.js     the page's data, elements, toasts      format.js  numbers, times, badges, JSON, Markdown
//   api.js     the JSON API and the token             runs.js    the runs list
//   run-page.js          a run's or thread's page: layout, status, the event stream, the end
//   run-events.js        each event type to what it changes on the page
//   run-conversation.js  messages and tool calls       run-waiting.js  approvals and client tools' outputs
//   run-side.js          usage, cost, facts, controls, sub-agents     composer.js  a thread's message box
//   diff.js              /diff?a=&b=: two runs side by side
//   quotas.js            a tenant's spend quota (/quotas/{tenant})

import { D } from "./dom.js";
import { askForToken, setupTokenButton, token } from "./api.js";
import { runsPage } from "./runs.js";
import { runPage } from "./run-page.js";
import { evalPage, evalsPage } from "./evals.js";
import { diffPage } from "./diff.js";
import { quotaPage } from "./quotas.js";

setupTokenButton();
if (D.auth === "1" && !token.get()) askForToken("");
else if (D.page === "runs") runsPage();
else if (D.page === "run") runPage(D.id, false);
else if (D.page === "thread") runPage(D.id, true);
else if (D.page === "evals") evalsPage();
else if (D.page === "eval") evalPage(D.id);
else if (D.page === "diff") diffPage();
else if (D.page === "quota") quotaPage(D.id);
