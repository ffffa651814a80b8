"""An agent card for each registered agent, from its spec and the server's tokens."""

from __future__ import annotations

from a2a.types import a2a_pb2 as pb

from agentloop.shared.base.text import cut
from agentloop.shared.definition.spec import AgentSpec

#: The A2A protocol version the cards announce (a2a-sdk 1.x).
PROTOCOL_VERSION = "1.0"
BEARER = "bearer"


def describe(spec: AgentSpec, name: str) -> str:
    """The card's description: the system prompt's first paragraph, cut."""
    first = spec.system_prompt.strip().split("\n\n", 1)[0].strip()
    return cut(first, 400) if first else f"agentloop agent {name} ({spec.model})"


def agent_card(name: str, spec: AgentSpec, url: str, *, tokens: bool) -> pb.AgentCard:
    """The card of registered agent ``name`` served at ``url`` (its JSON-RPC
    endpoint): one skill for the agent, one per sub-agent; streaming on;
    bearer auth when the server has tokens."""
    skills = [pb.AgentSkill(id=name, name=spec.name or name, description=describe(spec, name),
                            tags=sorted({*spec.tools, *spec.mcp_servers}) or ["agent"],
                            input_modes=["text/plain", "application/json"],
                            output_modes=["text/plain", "application/json"])]
    for sub_name, sub in sorted(spec.sub_agents.items()):
        skills.append(pb.AgentSkill(id=f"{name}.{sub_name}", name=sub_name, tags=["sub-agent"],
                                    description=cut(sub.description or f"sub-agent {sub_name}", 400)))
    card = pb.AgentCard(
        name=name, description=describe(spec, name), version="1",
        supported_interfaces=[pb.AgentInterface(url=url, protocol_binding="JSONRPC",
                                                protocol_version=PROTOCOL_VERSION)],
        capabilities=pb.AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"], skills=skills,
    )
    if tokens:
        card.security_schemes[BEARER].http_auth_security_scheme.CopyFrom(pb.HTTPAuthSecurityScheme(
            scheme="Bearer", description="a token of AGENTLOOP_API_TOKENS whose agents= list names this agent; "
            "scope read for GetTask and SubscribeToTask, act for the rest"))
        requirement = card.security_requirements.add()
        requirement.schemes[BEARER].SetInParent()
    return card
