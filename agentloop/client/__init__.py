"""The client side: :class:`~agentloop.AgentClient`, run handles, threads,
snapshots and the event reader. Never imports workflows or activities.

Internal: users import these names from :mod:`agentloop`.
"""
