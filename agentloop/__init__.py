"""agentloop: a durable, checkpointable LLM agent loop on Temporal."""
