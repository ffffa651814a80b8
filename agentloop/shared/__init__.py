"""Shared data: every pydantic model that crosses a Temporal boundary (workflow,
activity, signal, update and query inputs and results, events, snapshots),
and the contract names (:mod:`agentloop.shared.base.contracts`).

Imported by every side; imports none of them. Internal: users import these
names from :mod:`agentloop`.
"""
