"""The loop against its floor: agentloop's runs beside bare Temporal workflows
doing the same calls (one at a time, many at once, encrypted), and beside the
other durable agent frameworks (``peers``)."""
