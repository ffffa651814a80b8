"""AG-UI: the protocol's route (routes) and the translation of agentloop events into AG-UI events (mapping)."""
