"""Messages and their typed content parts.

A conversation is a list of :class:`Message`. Each message has a role and a
list of content parts, discriminated on ``type``. Tool-call ids flow from the
assistant's :class:`ToolCallPart` to the matching :class:`ToolResultPart`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Part):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class ThinkingPart(_Part):
    """Model reasoning that a provider returned alongside its answer.

    Attributes:
        text: The reasoning text.
        signature: Opaque provider signature (Anthropic) that must be sent back
            unchanged with the thinking block on the next request.
    """

    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None


class ImagePart(_Part):
    """An image, by URL or as base64 data.

    Attributes:
        url: An ``https:`` or ``data:`` URL.
        media_type: MIME type, e.g. ``image/png``, when ``data`` is set.
        data: Base64-encoded image bytes.
    """

    type: Literal["image"] = "image"
    url: str | None = None
    media_type: str | None = None
    data: str | None = None


class ToolCallPart(_Part):
    """The assistant asks for a tool to run.

    Attributes:
        id: Provider-issued call id; the result carries the same id.
        name: Tool name.
        arguments: Parsed JSON arguments.
        arguments_error: Set when the provider sent arguments that are not a
            JSON object; the loop answers such a call with an error result.
        raw_arguments: The arguments text as the provider sent it, kept when it
            failed to parse.
    """

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_error: str | None = None
    raw_arguments: str | None = None


class ToolResultPart(_Part):
    """The result of one tool call, fed back to the model.

    Attributes:
        id: The id of the :class:`ToolCallPart` this answers.
        name: Tool name, for providers and readers that want it.
        content: The result text the model sees.
        is_error: True when the call failed; the model sees ``content`` as the
            error and can recover.
        images: Images the tool returned (``view_image``), shown to the
            model with the result; left out of the JSON when there are none,
            so results without images serialise (and hash) as before.
    """

    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str = ""
    content: str
    is_error: bool = False
    images: list[ImagePart] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _without_empty_images(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not self.images:
            data.pop("images", None)
        return data


ContentPart = Annotated[
    TextPart | ThinkingPart | ImagePart | ToolCallPart | ToolResultPart,
    Field(discriminator="type"),
]

Role = Literal["system", "user", "assistant", "tool"]


class Message(BaseModel):
    """One message of a conversation.

    Attributes:
        role: ``user``, ``assistant``, ``tool`` (tool results) or ``system``.
        content: Typed content parts.
    """

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: list[ContentPart] = Field(default_factory=list)

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message holding one text part."""
        return cls(role="user", content=[TextPart(text=text)])

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message holding one text part."""
        return cls(role="system", content=[TextPart(text=text)])

    @classmethod
    def assistant(cls, text: str = "", tool_calls: list[ToolCallPart] | None = None) -> Message:
        """An assistant message with optional text and tool calls."""
        parts: list[Any] = [TextPart(text=text)] if text else []
        parts.extend(tool_calls or [])
        return cls(role="assistant", content=parts)

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool-call parts, in order."""
        return [p for p in self.content if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool-result parts, in order."""
        return [p for p in self.content if isinstance(p, ToolResultPart)]


#: What the note of a cut output suggests, by tool; other tools: :data:`CUT_HINT`.
CUT_HINTS = {
    "shell_command": "narrow the command",
    "read_file": "read a smaller range",
    "grep_files": "narrow the search",
    "list_dir": "list a smaller directory",
}
CUT_HINT = "ask for less"


def cut_hint(tool_name: str) -> str:
    """What a cut output of ``tool_name`` suggests doing (never a shell
    command for a tool that is not the shell)."""
    return CUT_HINTS.get(tool_name, CUT_HINT)
