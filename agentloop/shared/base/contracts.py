"""The names both sides of a Temporal boundary use: the contract.

A client starts ``AgentRunWorkflow`` by name, a workflow calls its
activities by name, and a worker registers both under these names. They
never change: runs in flight and other languages' clients depend on them.
"""

#: The workflow type name agent runs are started with.
WORKFLOW_NAME = "AgentRunWorkflow"

#: The workflow a schedule that feeds a thread starts at each firing: it
#: sends the firing's input to the thread (starting the thread the first time).
SCHEDULE_FEED_WORKFLOW_NAME = "AgentScheduleFeed"

#: Largest run input a run is started with (Temporal's payload limit is
#: 2 MB, and the run's first events carry the input again).
MAX_INPUT_BYTES = 1_500_000


#: The suffix of the task queue that serves tool activities beside a run's own
#: queue (``<queue>-tools``), for workers started with role ``tools``.
TOOL_QUEUE_SUFFIX = "-tools"


# The agent's activities, by the names workers register them under and runs
# call them by (agentloop/activities/agent_activities.py defines them).

#: One LLM call: a step, or a compaction summary.
CALL_MODEL = "call_model"
#: One tool call, on the tools queue.
EXECUTE_TOOL = "execute_tool"
#: One call of a tool registered ``local=True``: a local activity of the run's worker.
EXECUTE_TOOL_HERE = "execute_tool_here"
#: The definitions of the spec's tools, on the tools queue.
RESOLVE_TOOLS = "resolve_tools"
#: The same, as a local activity of a worker that also serves the tools.
RESOLVE_TOOLS_HERE = "resolve_tools_here"
#: The run's context from the worker's context providers.
LOAD_CONTEXT = "load_context"
#: The spec's tool hooks around an activity tool's call.
RUN_TOOL_HOOKS = "run_tool_hooks"
#: Which of the spec's guardrails the worker has.
RESOLVE_GUARDRAILS = "resolve_guardrails"
#: One guardrail's verdict.
RUN_GUARDRAIL = "run_guardrail"


# Signals, updates and queries of AgentRunWorkflow. ``approve``,
# ``submit_tool_outputs``, ``send`` and ``steer`` are each a signal (fire and
# forget, e.g. from ``temporal workflow signal``) and a validated update of the
# same name (refused before it reaches history when wrong).

#: Signal and update: a decision on a call that waits for approval.
APPROVE = "approve"
#: Signal and update: outputs of client-side tool calls (``requires_action``).
SUBMIT_TOOL_OUTPUTS = "submit_tool_outputs"
#: Signal and update: a thread's next message.
SEND = "send"
#: Signal and update: something the agent sees before its next step.
STEER = "steer"
#: Signal: end the run ``stopped`` after its current step.
STOP_SIGNAL = "stop"
#: Query: status, step, pending approvals and tool calls.
STATE_QUERY = "state"
#: Query: the run's messages.
MESSAGES_QUERY = "messages"
#: Query: the run report.
REPORT_QUERY = "report"
#: Query: the run's snapshot (``agentloop export``).
EXPORT_QUERY = "export"
#: Query: a page of the transcript (the LLM activity reads messages by reference).
TRANSCRIPT_QUERY = "transcript"
#: Query: the system prompt and tools a step is called with.
MODEL_CONTEXT_QUERY = "model_context"
#: Query: calls waiting for approval or for client outputs.
PENDING_QUERY = "pending"
#: Query: one turn of a thread.
TURN_QUERY = "turn"
#: The Workflow Streams topic the run's events are published on (read with the
#: stream's poll query, from an offset).
EVENTS_TOPIC = "events"

#: The extern function a worker's telemetry gives workflows
#: (``workflow.extern_functions()``): the recorder hands it each event it
#: publishes, outside replays (agentloop.workers.telemetry).
OBSERVE_EXTERN = "__agentloop_observe"

#: Live deltas (docs/events.md): the gateway's door a worker posts each
#: streamed delta to, the worker's setting naming the gateway, and the secret
#: both hold (never in a workflow's input, history or events).
LIVE_PATH = "/internal/live"
LIVE_URL_ENV = "AGENTLOOP_LIVE_URL"
LIVE_TOKEN_ENV = "AGENTLOOP_LIVE_TOKEN"
