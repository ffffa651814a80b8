"""The tool API that a worker runs: the ``tool`` decorator and registry,
``ToolContext``, isolation of sync tools, tool hooks, guardrails and context
providers. Code here runs in worker processes, in activities.

Internal: users import these names from :mod:`agentloop`.
"""
