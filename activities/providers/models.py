"""Which ChatModel serves a ``provider:model`` string, in this worker."""

from __future__ import annotations

from collections.abc import Callable

from temporalio.exceptions import ApplicationError

from agentloop.shared.base.errors import MODEL_CONFIGURATION_ERROR_TYPE
from agentloop.shared.definition.activity_io import ChatModel
from agentloop.shared.definition.spec import parse_model

ChatModelFactory = Callable[[str, str], ChatModel]


class ModelResolver:
    """Builds provider clients once per worker and hands them out by model.

    Args:
        overrides: Factories by provider name that replace the built-in ones
            (e.g. an OpenAI client with custom HTTP settings).
    """

    def __init__(self, overrides: dict[str, ChatModelFactory] | None = None) -> None:
        self._overrides = dict(overrides or {})
        self._clients: dict[str, ChatModel] = {}

    def resolve(self, model: str) -> ChatModel:
        """The ChatModel for ``provider:model``.

        Raises:
            ApplicationError: Non-retryable, for a malformed or unknown model.
        """
        try:
            provider, name = parse_model(model)
        except ValueError as exc:
            raise ApplicationError(str(exc), type=MODEL_CONFIGURATION_ERROR_TYPE, non_retryable=True) from None
        if provider in self._overrides:
            return self._overrides[provider](provider, name)
        if provider == "scripted":
            from agentloop.activities.providers.scripted_model import get_scripted_model

            return get_scripted_model(name)
        client = self._clients.get(provider)
        if client is None:
            client = self._build(provider)
            self._clients[provider] = client
        return client

    @staticmethod
    def _build(provider: str) -> ChatModel:
        if provider == "openai":
            from agentloop.activities.providers.openai_model import OpenAIChatModel

            return OpenAIChatModel.from_env()
        if provider == "anthropic":
            from agentloop.activities.providers.anthropic_model import AnthropicChatModel

            return AnthropicChatModel.from_env()
        raise ApplicationError(
            f"this worker has no provider {provider!r}", type=MODEL_CONFIGURATION_ERROR_TYPE, non_retryable=True
        )
