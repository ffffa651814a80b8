"""Kept only because tests/test_provider_openai.py still imports
``agentloop`` and ``clean_env`` from here; both live in tests/helpers/cli.py.
Delete this file once that import reads ``from tests.helpers.cli import ...``.
No tests here: the CLI tests are tests/process/test_cli.py."""

from tests.helpers.cli import agentloop, clean_env

__all__ = ["agentloop", "clean_env"]
