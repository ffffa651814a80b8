"""The base layer of the shared data: errors, messages, model settings, usage,
text limits and the contract names. Imports nothing else from ``shared``."""
