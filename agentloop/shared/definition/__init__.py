"""The agent's definition: the spec and what it is made of (tools, permissions,
pricing, output, context policy and providers, guardrails, fingerprint).
Imports only :mod:`agentloop.shared.base`."""
