"""AgentSpec refuses unknown keys, and a misspelt one names the field meant."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agentloop import AgentSpec
from agentloop.shared.base.errors import describe_validation_error


def refusal(**fields: object) -> str:
    with pytest.raises(ValidationError) as caught:
        AgentSpec(model="scripted:demo", **fields)
    return describe_validation_error(caught.value)


def test_a_misspelt_key_suggests_the_field() -> None:
    assert refusal(max_step=5) == "max_step: Extra inputs are not permitted; did you mean max_steps?"
    with pytest.raises(ValidationError, match="did you mean max_steps"):
        AgentSpec.model_validate({"model": "scripted:demo", "max_step": 5})


def test_a_misspelt_key_of_a_sub_agent_suggests_the_field() -> None:
    text = refusal(sub_agents={"helper": {"spec": {"model": "scripted:demo", "sytem_prompt": "x"}}})
    assert text == "sub_agents.helper.spec.sytem_prompt: Extra inputs are not permitted; did you mean system_prompt?"


def test_a_key_like_no_field_is_refused_as_before() -> None:
    assert refusal(zzzz=1) == "zzzz: Extra inputs are not permitted"


def test_other_problems_are_kept_beside_the_suggestion() -> None:
    text = refusal(max_step=5, max_depth=0)
    assert "max_step: Extra inputs are not permitted; did you mean max_steps?" in text
    assert "max_depth: Input should be greater than or equal to 1" in text


@pytest.mark.parametrize("workspace", ["/proc", "/proc/self/fd", "/sys/class", "/dev", "/dev/shm/x/.."])
def test_a_workspace_in_a_kernel_filesystem_is_refused_at_start(workspace: str, tmp_path: Path) -> None:
    from pydantic import ValidationError

    from agentloop.cli.common import existing_workspace
    from agentloop.shared.base.errors import UserError

    root = "/" + workspace.split("/")[1]
    with pytest.raises(ValidationError) as info:
        AgentSpec(model="scripted:x", workspace=workspace)
    assert (f"workspace {workspace} is in {root}, a kernel filesystem, not a project directory; use a directory of "
            "your project") in str(info.value)
    # The CLI resolves symlinks first: a link into /proc is refused too.
    link = tmp_path / "link"
    link.symlink_to(workspace)
    with pytest.raises(UserError, match=f"^--workspace {link}: workspace .* is in {root}, a kernel filesystem"):
        existing_workspace(str(link))
    assert AgentSpec(model="scripted:x", workspace="/devices/x").workspace == "/devices/x"
