"""``agentloop eval``: evaluate a change against recorded runs (docs/evals.md)."""
