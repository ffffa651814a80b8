"""Commands that keep serving: ``dev``, ``worker``, ``serve`` (HTTP) and
``codec-server``."""
