"""Tests of the built-in tools and their workspace confinement.

Tools are called through ``Tool.run`` so the schema validation the executor
relies on is part of every test.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from agentloop.activities.builtin_tools import BUILTIN_TOOLS, register_builtin_tools
from agentloop.activities.builtin_tools.workspace import resolve_in_workspace, workspace_relative
from agentloop.shared.base.errors import ToolError
from agentloop.shared.base.messages import cut_hint
from agentloop.shared.base.text import cut_marked
from agentloop.tools.registry import InvalidToolArguments, ToolRegistry
from agentloop.tools.tool_context import ToolContext
from tests.helpers.processes import unique_sleep, wait_until_gone, wait_until_running

TOOLS = {t.name: t for t in BUILTIN_TOOLS}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, with a file the tools must not reach."""
    other = tmp_path / "outside"
    other.mkdir()
    (other / "secret.txt").write_text("top secret\n")
    return other


def make_ctx(ws: Path, **kwargs: Any) -> ToolContext:
    return ToolContext(workspace=ws, **kwargs)


async def run(name: str, ws: Path, ctx: ToolContext | None = None, **arguments: Any) -> Any:
    return await TOOLS[name].run(arguments, ctx or make_ctx(ws))


async def run_error(name: str, ws: Path, ctx: ToolContext | None = None, **arguments: Any) -> str:
    with pytest.raises(ToolError) as info:
        await run(name, ws, ctx, **arguments)
    return str(info.value)


# --------------------------------------------------------------------------
# resolve_in_workspace


def test_resolve_relative_and_absolute_inside(ws: Path) -> None:
    (ws / "a").mkdir()
    assert resolve_in_workspace(ws, "a/b.txt") == ws.resolve() / "a" / "b.txt"
    assert resolve_in_workspace(ws, str(ws / "a")) == ws.resolve() / "a"
    assert resolve_in_workspace(ws, ".") == ws.resolve()
    assert resolve_in_workspace(ws, "a/../a/./c") == ws.resolve() / "a" / "c"


def test_resolve_rejects_dotdot_escape(ws: Path) -> None:
    with pytest.raises(ToolError) as info:
        resolve_in_workspace(ws, "../etc/passwd")
    assert str(info.value) == (
        f"Path '../etc/passwd' is outside the workspace {ws}; use a path inside it "
        "(relative paths are resolved against the workspace)"
    )


def test_resolve_rejects_absolute_outside(ws: Path) -> None:
    with pytest.raises(ToolError) as info:
        resolve_in_workspace(ws, "/etc/passwd")
    assert str(info.value) == (
        f"Path '/etc/passwd' is outside the workspace {ws}; use a path inside it "
        "(relative paths are resolved against the workspace)"
    )


def test_resolve_rejects_sibling_with_common_prefix(ws: Path, tmp_path: Path) -> None:
    # "/tmp/x/ws-other" starts with the string "/tmp/x/ws" but is not inside it.
    (tmp_path / "ws-other").mkdir()
    with pytest.raises(ToolError, match="is outside the workspace"):
        resolve_in_workspace(ws, str(tmp_path / "ws-other" / "f"))


def test_resolve_rejects_symlinks_leading_outside(ws: Path, outside: Path) -> None:
    (ws / "file_link").symlink_to(outside / "secret.txt")
    (ws / "dir_link").symlink_to(outside)
    (ws / "dangling").symlink_to(outside / "not-yet")
    real_outside = outside.resolve()
    cases = {
        "file_link": real_outside / "secret.txt",
        "dir_link/secret.txt": real_outside / "secret.txt",
        "dir_link/new/deeper.txt": real_outside / "new" / "deeper.txt",
        "dangling": real_outside / "not-yet",
    }
    for path, target in cases.items():
        with pytest.raises(ToolError) as info:
            resolve_in_workspace(ws, path)
        assert str(info.value) == (
            f"Path '{path}' leads through a symlink to {target}, which is outside the "
            f"workspace {ws}; use a path inside it"
        )


def test_resolve_allows_symlinks_inside(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "real" / "f.txt").write_text("x")
    (ws / "alias").symlink_to(ws / "real")
    assert resolve_in_workspace(ws, "alias/f.txt") == ws.resolve() / "real" / "f.txt"


def test_resolve_workspace_reached_through_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real_ws"
    real.mkdir()
    link = tmp_path / "link_ws"
    link.symlink_to(real)
    assert resolve_in_workspace(link, "f.txt") == real / "f.txt"
    assert resolve_in_workspace(link, str(link / "f.txt")) == real / "f.txt"
    assert resolve_in_workspace(link, str(real / "f.txt")) == real / "f.txt"
    assert workspace_relative(link, real / "sub" / "f.txt") == "sub/f.txt"


def test_resolve_must_exist(ws: Path) -> None:
    with pytest.raises(ToolError) as info:
        resolve_in_workspace(ws, "nope.txt", must_exist=True)
    assert str(info.value) == (
        f"Path 'nope.txt' does not exist in the workspace {ws} "
        "(relative paths are resolved against the workspace)"
    )


def test_resolve_rejects_nul_and_home(ws: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        resolve_in_workspace(ws, "a\x00b")
    with pytest.raises(ToolError, match="is outside the workspace"):
        resolve_in_workspace(ws, "~/.ssh/id_rsa")


# --------------------------------------------------------------------------
# cutting a tool's output


def test_cut_keeps_short_text() -> None:
    assert cut_marked("hello", 5, tail=True) == ("hello", False)
    assert cut_marked("", 0, tail=True) == ("", False)


def test_cut_output_keeps_head_and_tail_around_the_mark() -> None:
    text = "".join(f"{i:05d}\n" for i in range(10_000))  # 60_000 characters
    out, truncated = cut_marked(text, 3000, hint=cut_hint("shell_command"), tail=True)
    assert truncated and len(out) == 3000
    mark = "…[57,044 characters cut: narrow the command]"
    head, tail = out.split(mark)
    assert text.startswith(head) and len(head) == (3000 - len(mark)) * 2 // 3
    assert text.endswith(tail) and len(head) + len(tail) == 3000 - len(mark)


# --------------------------------------------------------------------------
# registration and arguments


def test_builtin_tools_flags_and_registration() -> None:
    assert {t.name: t.read_only for t in BUILTIN_TOOLS} == {
        "shell_command": False,
        "read_file": True,
        "write_file": False,
        "apply_patch": False,
        "grep_files": True,
        "list_dir": True,
        "view_image": True,
    }
    registry = ToolRegistry()
    register_builtin_tools(registry)
    register_builtin_tools(registry)  # idempotent
    assert registry.names() == sorted(TOOLS)


def test_schemas_document_every_parameter() -> None:
    for builtin in BUILTIN_TOOLS:
        params = builtin.parameters
        assert "ctx" not in params["properties"], builtin.name
        for name, prop in params["properties"].items():
            assert prop.get("description"), f"{builtin.name}.{name} has no description"
        assert builtin.description, builtin.name


async def test_missing_required_argument(ws: Path) -> None:
    with pytest.raises(InvalidToolArguments) as info:
        await TOOLS["shell_command"].run({}, make_ctx(ws))
    message = str(info.value)
    assert message.startswith("Invalid arguments for tool 'shell_command': command: Field required")
    assert "Expected arguments matching this JSON schema" in message


async def test_wrong_argument_type(ws: Path) -> None:
    with pytest.raises(InvalidToolArguments) as info:
        await TOOLS["shell_command"].run({"command": 42}, make_ctx(ws))
    assert str(info.value).startswith(
        "Invalid arguments for tool 'shell_command': command: Input should be a valid string"
    )
    with pytest.raises(InvalidToolArguments) as info:
        await TOOLS["read_file"].run({"file_path": "a", "offset": "first"}, make_ctx(ws))
    assert str(info.value).startswith("Invalid arguments for tool 'read_file': offset: ")


async def test_unknown_argument(ws: Path) -> None:
    with pytest.raises(InvalidToolArguments, match="cwd: Extra inputs are not permitted"):
        await TOOLS["shell_command"].run({"command": "true", "cwd": "."}, make_ctx(ws))


# --------------------------------------------------------------------------
# shell_command


async def test_shell_happy_path(ws: Path) -> None:
    ctx = make_ctx(ws)
    out = await run("shell_command", ws, ctx, command="echo out; echo err >&2; pwd")
    assert out == f"exit code: 0\nout\nerr\n{ws.resolve()}\n"
    assert ctx.metrics["exit_code"] == 0
    assert isinstance(ctx.metrics["duration_ms"], int)


async def test_shell_nonzero_exit_is_reported(ws: Path) -> None:
    ctx = make_ctx(ws)
    out = await run("shell_command", ws, ctx, command="echo failing; exit 3")
    assert out == "exit code: 3\nfailing\n"
    assert ctx.metrics["exit_code"] == 3


async def test_shell_no_output(ws: Path) -> None:
    assert await run("shell_command", ws, command="true") == "exit code: 0\n(no output)"


async def test_shell_workdir(ws: Path) -> None:
    (ws / "sub").mkdir()
    out = await run("shell_command", ws, command="pwd", workdir="sub")
    assert out == f"exit code: 0\n{ws.resolve() / 'sub'}\n"


async def test_shell_workdir_confined(ws: Path, outside: Path) -> None:
    message = await run_error("shell_command", ws, command="ls", workdir="..")
    assert message.startswith("Path '..' is outside the workspace")
    (ws / "escape").symlink_to(outside)
    message = await run_error("shell_command", ws, command="ls", workdir="escape")
    assert "leads through a symlink" in message
    (ws / "file").write_text("x")
    assert await run_error("shell_command", ws, command="ls", workdir="file") == (
        "workdir 'file' is not a directory"
    )


async def test_shell_rejects_bad_timeout_and_empty_command(ws: Path) -> None:
    assert await run_error("shell_command", ws, command="true", timeout_seconds=0) == (
        "timeout_seconds must be greater than 0, got 0"
    )
    assert await run_error("shell_command", ws, command="   ") == (
        "The command is empty; pass the bash command line to run"
    )


async def test_shell_command_that_cannot_start(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With an empty PATH, "bash" cannot be found: the start itself fails.
    monkeypatch.setenv("PATH", "")
    message = await run_error("shell_command", ws, command="true")
    assert message.startswith("The command could not be started: ")


async def test_shell_is_not_a_login_shell(ws: Path) -> None:
    out = await run("shell_command", ws, command="shopt -q login_shell && echo login || echo plain")
    assert out == "exit code: 0\nplain\n"


async def test_shell_has_no_stdin(ws: Path) -> None:
    out = await run("shell_command", ws, command="cat; echo done", timeout_seconds=10)
    assert out == "exit code: 0\ndone\n"


async def test_shell_hides_secret_env(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://leak")
    monkeypatch.setenv("AWS_REGION", "leak-1")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_leak")
    monkeypatch.setenv("DB_PASSWORD", "leak")
    monkeypatch.setenv("my_secret_thing", "leak")
    monkeypatch.setenv("DATABASE_URL", "postgres://leak")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    monkeypatch.setenv("AGENTLOOP_SHELL_ENV", "HARMLESS_SETTING")  # the operator's allowlist extension
    out = await run(
        "shell_command",
        ws,
        command='echo "[$OPENAI_API_KEY]"; env | grep -c leak; echo "$HARMLESS_SETTING"',
    )
    assert out == "exit code: 0\n[]\n0\nvisible\n"


async def test_shell_heartbeats_while_waiting(ws: Path) -> None:
    beats: list[float] = []
    ctx = make_ctx(ws, heartbeat=lambda *details: beats.append(time.monotonic()))
    await run("shell_command", ws, ctx, command="sleep 2.5")
    assert len(beats) >= 2


async def test_shell_timeout_kills_process_group(ws: Path) -> None:
    ctx = make_ctx(ws)
    started = time.monotonic()
    tag = unique_sleep()
    message = await run_error(
        "shell_command",
        ws,
        ctx,
        command=f"echo started; sleep {tag} & wait",
        timeout_seconds=1,
    )
    assert time.monotonic() - started < 10
    assert message.startswith(
        f"Command timed out after 1s and was killed: echo started; sleep {tag} & wait\n"
    )
    assert "Output before it was killed:\nstarted" in message
    assert ctx.metrics["timed_out"] is True
    assert await wait_until_gone(tag) == [], "sleep survived the timeout"


async def test_shell_timeout_kills_processes_ignoring_sigterm(ws: Path) -> None:
    message = await run_error(
        "shell_command",
        ws,
        command=f"trap '' TERM; (trap '' TERM; sleep {(tag := unique_sleep())}) & wait",
        timeout_seconds=1,
    )
    assert message.startswith("Command timed out after 1s and was killed")
    assert await wait_until_gone(tag) == []


async def test_shell_cancellation_kills_process_group(ws: Path) -> None:
    tag = unique_sleep()
    task = asyncio.create_task(
        run("shell_command", ws, command=f"sleep {tag} & wait", timeout_seconds=60)
    )
    await wait_until_running(tag)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_until_gone(tag) == [], "sleep survived cancellation"


async def test_shell_background_process_is_cleaned_up(ws: Path) -> None:
    tag = unique_sleep()
    out = await run("shell_command", ws, command=f"sleep {tag} > /dev/null 2>&1 & echo ok")
    assert out == "exit code: 0\nok\n"
    assert await wait_until_gone(tag) == []


async def test_shell_background_process_holding_output_does_not_hang(ws: Path) -> None:
    started = time.monotonic()
    tag = unique_sleep()
    out = await run("shell_command", ws, command=f"sleep {tag} & echo ok")
    assert time.monotonic() - started < 10
    assert out == "exit code: 0\nok\n"
    assert await wait_until_gone(tag) == []


async def test_shell_huge_output_is_capped(ws: Path) -> None:
    ctx = make_ctx(ws, output_limit=1000)
    # About 50 MB: far more than the capture keeps.
    out = await run(
        "shell_command",
        ws,
        ctx,
        command="echo FIRST; head -c 50000000 /dev/zero | tr '\\0' x; echo; echo LAST",
    )
    assert out.startswith("exit code: 0 (the command printed 50000012 bytes; only the first")
    assert "\nFIRST\n" in out
    assert out.endswith("\nLAST\n")
    assert re.search(r"\[\.\.\. \d+ bytes of output omitted \.\.\.\]", out)
    assert len(out) < 10_000
    assert ctx.metrics["output_bytes"] == 50_000_012


async def test_shell_reports_signal_death(ws: Path) -> None:
    out = await run("shell_command", ws, command="kill -KILL $$")
    assert out == "exit code: -9 (killed by signal SIGKILL)\n(no output)"


# --------------------------------------------------------------------------
# read_file


async def test_read_file_happy_path(ws: Path) -> None:
    (ws / "f.txt").write_text("alpha\nbeta\ngamma\n")
    out = await run("read_file", ws, file_path="f.txt")
    assert out == "     1\talpha\n     2\tbeta\n     3\tgamma"


async def test_read_file_offset_limit_and_more_note(ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await run("read_file", ws, file_path="f.txt", offset=3, limit=2)
    assert out == (
        "     3\tline 3\n     4\tline 4\n"
        "[... 6 more lines: showing lines 3-4 of 10; call read_file with offset=5 to read on ...]"
    )
    out = await run("read_file", ws, file_path="f.txt", offset=9, limit=5)
    assert out == "     9\tline 9\n    10\tline 10"


async def test_read_file_absolute_path_inside(ws: Path) -> None:
    (ws / "f.txt").write_text("x")
    assert await run("read_file", ws, file_path=str(ws / "f.txt")) == "     1\tx"


async def test_read_file_bad_offset(ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\n")
    assert await run_error("read_file", ws, file_path="f.txt", offset=5) == (
        "offset 5 is past the end of 'f.txt', which has 2 lines"
    )
    assert await run_error("read_file", ws, file_path="f.txt", offset=0) == (
        "offset must be 1 or more (the first line is line 1), got 0"
    )
    assert await run_error("read_file", ws, file_path="f.txt", limit=0) == (
        "limit must be 1 or more, got 0"
    )


async def test_read_file_empty_and_invalid_utf8(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    assert await run("read_file", ws, file_path="empty.txt") == "'empty.txt' is empty."
    (ws / "latin1.txt").write_bytes(b"caf\xe9\r\nnext\r\n")
    assert await run("read_file", ws, file_path="latin1.txt") == "     1\tcaf\ufffd\n     2\tnext"


async def test_read_file_directory(ws: Path) -> None:
    (ws / "sub").mkdir()
    assert await run_error("read_file", ws, file_path="sub") == (
        "'sub' is a directory, not a file; use list_dir to see what it contains"
    )


async def test_read_file_binary(ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    assert await run_error("read_file", ws, file_path="blob.bin") == (
        "'blob.bin' looks like a binary file (it contains NUL bytes); read_file only shows text files"
    )
    # A NUL past the sniffed prefix is caught too.
    (ws / "late.bin").write_bytes(b"a\n" * 10_000 + b"\x00")
    assert "looks like a binary file" in await run_error("read_file", ws, file_path="late.bin")


async def test_read_file_missing(ws: Path) -> None:
    assert await run_error("read_file", ws, file_path="nope.txt") == (
        f"Path 'nope.txt' does not exist in the workspace {ws} "
        "(relative paths are resolved against the workspace)"
    )


async def test_read_file_confined(ws: Path, outside: Path) -> None:
    assert await run_error("read_file", ws, file_path="../outside/secret.txt") == (
        f"Path '../outside/secret.txt' is outside the workspace {ws}; use a path inside it "
        "(relative paths are resolved against the workspace)"
    )
    path = str(outside / "secret.txt")
    assert await run_error("read_file", ws, file_path=path) == (
        f"Path '{path}' is outside the workspace {ws}; use a path inside it "
        "(relative paths are resolved against the workspace)"
    )
    (ws / "file_link").symlink_to(outside / "secret.txt")
    (ws / "dir_link").symlink_to(outside)
    real = outside.resolve() / "secret.txt"
    assert await run_error("read_file", ws, file_path="file_link") == (
        f"Path 'file_link' leads through a symlink to {real}, which is outside the "
        f"workspace {ws}; use a path inside it"
    )
    assert await run_error("read_file", ws, file_path="dir_link/secret.txt") == (
        f"Path 'dir_link/secret.txt' leads through a symlink to {real}, which is outside the "
        f"workspace {ws}; use a path inside it"
    )


# --------------------------------------------------------------------------
# write_file


async def test_write_file_creates_parents_and_overwrites(ws: Path) -> None:
    out = await run("write_file", ws, file_path="a/b/c.txt", content="héllo\n")
    assert out == "Wrote 7 bytes to a/b/c.txt"
    assert (ws / "a/b/c.txt").read_text() == "héllo\n"
    out = await run("write_file", ws, file_path="a/b/c.txt", content="x")
    assert out == "Wrote 1 bytes to a/b/c.txt"
    assert (ws / "a/b/c.txt").read_text() == "x"


async def test_write_file_errors(ws: Path) -> None:
    (ws / "sub").mkdir()
    assert await run_error("write_file", ws, file_path="sub", content="x") == (
        "'sub' is a directory; give the path of a file"
    )
    (ws / "plain").write_text("x")
    assert await run_error("write_file", ws, file_path="plain/child.txt", content="x") == (
        "Could not write 'plain/child.txt': part of its parent path is a file, not a directory"
    )


async def test_write_file_confined(ws: Path, outside: Path) -> None:
    message = await run_error("write_file", ws, file_path="../evil.txt", content="x")
    assert message.startswith("Path '../evil.txt' is outside the workspace")
    (ws / "dir_link").symlink_to(outside)
    message = await run_error("write_file", ws, file_path="dir_link/new/evil.txt", content="x")
    assert message == (
        f"Path 'dir_link/new/evil.txt' leads through a symlink to "
        f"{outside.resolve() / 'new' / 'evil.txt'}, which is outside the workspace {ws}; "
        "use a path inside it"
    )
    (ws / "file_link").symlink_to(outside / "secret.txt")
    message = await run_error("write_file", ws, file_path="file_link", content="x")
    assert "leads through a symlink" in message
    assert not (outside / "new").exists()
    assert (outside / "secret.txt").read_text() == "top secret\n"


# --------------------------------------------------------------------------
# apply_patch


async def test_apply_patch_add_update_delete(ws: Path) -> None:
    (ws / "app.py").write_text("import os\n\n\ndef main():\n    print('hi')\n    return 0\n")
    (ws / "old.txt").write_text("bye\n")
    patch = """*** Begin Patch
*** Add File: pkg/new.py
+x = 1
+
+y = 2
*** Update File: app.py
@@ def main():
-    print('hi')
+    print('hello')
     return 0
*** Delete File: old.txt
*** End Patch"""
    out = await run("apply_patch", ws, patch=patch)
    assert out == "Applied the patch:\nA pkg/new.py\nM app.py\nD old.txt"
    assert (ws / "pkg/new.py").read_text() == "x = 1\n\ny = 2\n"
    assert (ws / "app.py").read_text() == (
        "import os\n\n\ndef main():\n    print('hello')\n    return 0\n"
    )
    assert not (ws / "old.txt").exists()


async def test_apply_patch_multiple_hunks_and_end_of_file(ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"{i}\n" for i in range(1, 21)))
    patch = """*** Begin Patch
*** Update File: f.txt
@@
 2
-3
+three
 4
@@
 18
 19
-20
+twenty
*** End of File
*** End Patch"""
    await run("apply_patch", ws, patch=patch)
    lines = (ws / "f.txt").read_text().splitlines()
    assert lines[2] == "three" and lines[-1] == "twenty" and len(lines) == 20


async def test_apply_patch_move(ws: Path) -> None:
    (ws / "a.sh").write_text("#!/bin/sh\necho a\n")
    (ws / "a.sh").chmod(0o755)
    patch = """*** Begin Patch
*** Update File: a.sh
*** Move to: bin/b.sh
@@
-echo a
+echo b
*** End Patch"""
    out = await run("apply_patch", ws, patch=patch)
    assert out == "Applied the patch:\nM bin/b.sh (moved from a.sh)"
    assert not (ws / "a.sh").exists()
    assert (ws / "bin/b.sh").read_text() == "#!/bin/sh\necho b\n"
    assert os.access(ws / "bin/b.sh", os.X_OK)


async def test_apply_patch_whitespace_tolerance(ws: Path) -> None:
    (ws / "f.py").write_text("def f():   \n\treturn 1\n")
    # The model dropped trailing spaces and wrote spaces instead of a tab.
    patch = """*** Begin Patch
*** Update File: f.py
@@
 def f():
-    return 1
+\treturn 2
*** End Patch"""
    await run("apply_patch", ws, patch=patch)
    assert (ws / "f.py").read_text() == "def f():   \n\treturn 2\n"


async def test_apply_patch_prefers_exact_match(ws: Path) -> None:
    (ws / "f.txt").write_text("  x\nx\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n@@\n-x\n+y\n*** End Patch"
    await run("apply_patch", ws, patch=patch)
    assert (ws / "f.txt").read_text() == "  x\ny\n"


async def test_apply_patch_keeps_crlf_and_missing_final_newline(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    (ws / "nonl.txt").write_bytes(b"one\ntwo")
    patch = """*** Begin Patch
*** Update File: win.txt
@@
-two
+2
*** Update File: nonl.txt
@@
-one
+1
*** End Patch"""
    await run("apply_patch", ws, patch=patch)
    assert (ws / "win.txt").read_bytes() == b"one\r\n2\r\n"
    assert (ws / "nonl.txt").read_bytes() == b"1\ntwo"


async def test_apply_patch_unified_header_and_pure_insertion(ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\nc\nd\n")
    patch = """*** Begin Patch
*** Update File: f.txt
@@ -1,2 +1,3 @@
 a
+inserted
 b
@@ c
+after c
*** End Patch"""
    await run("apply_patch", ws, patch=patch)
    assert (ws / "f.txt").read_text() == "a\ninserted\nb\nc\nafter c\nd\n"


async def test_apply_patch_context_mismatch_writes_nothing(ws: Path) -> None:
    (ws / "first.txt").write_text("one\ntwo\n")
    (ws / "second.txt").write_text("alpha\nbeta\ngamma\n")
    patch = """*** Begin Patch
*** Add File: created.txt
+new
*** Update File: first.txt
@@
-one
+ONE
*** Update File: second.txt
@@
 alpha
-beta
+BETA
@@
 gamma
-delta
+DELTA
*** End Patch"""
    message = await run_error("apply_patch", ws, patch=patch)
    assert message == (
        "apply_patch failed: in 'second.txt', the context of hunk 2 (patch line 13) did not "
        "match. Expected these lines at or after line 3:\n"
        "    gamma\n"
        "    delta\n"
        "No file was changed; read the file again and regenerate the patch."
    )
    assert (ws / "first.txt").read_text() == "one\ntwo\n"
    assert (ws / "second.txt").read_text() == "alpha\nbeta\ngamma\n"
    assert not (ws / "created.txt").exists()


async def test_apply_patch_header_context_mismatch(ws: Path) -> None:
    (ws / "f.py").write_text("def a():\n    pass\n")
    patch = "*** Begin Patch\n*** Update File: f.py\n@@ def b():\n-    pass\n+    return\n*** End Patch"
    assert await run_error("apply_patch", ws, patch=patch) == (
        "apply_patch failed: in 'f.py', hunk 1 (patch line 3) starts with '@@ def b():', but "
        "no line at or after line 1 matches it. No file was changed; read the file again and "
        "regenerate the patch."
    )


async def test_apply_patch_hunks_out_of_order_fail(ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\nc\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n@@\n-c\n+C\n@@\n-a\n+A\n*** End Patch"
    message = await run_error("apply_patch", ws, patch=patch)
    assert "hunk 2 (patch line 6) did not match. Expected these lines at or after line 4" in message


async def test_apply_patch_format_errors(ws: Path) -> None:
    (ws / "exists.txt").write_text("x\n")
    cases = {
        "*** Update File: a\n*** End Patch": "The patch must start with the line '*** Begin Patch'",
        "*** Begin Patch\n*** Add File: a\n+x": "The patch must end with the line '*** End Patch'",
        "*** Begin Patch\n*** End Patch": "The patch changes no file",
        "*** Begin Patch\n--- a/f\n*** End Patch": (
            "Line 2 of the patch: expected '*** Add File: ', '*** Delete File: ', "
            "'*** Update File: ' or '*** End Patch'; got '--- a/f'"
        ),
        "*** Begin Patch\n*** Add File: n.txt\nno plus\n*** End Patch": (
            "Line 3 of the patch: every line of '*** Add File: n.txt' must start with '+' "
            "(use '+' alone for an empty line); got 'no plus'"
        ),
        "*** Begin Patch\n*** Update File: exists.txt\n@@\n?x\n*** End Patch": (
            "Line 4 of the patch: in '*** Update File: exists.txt', hunk lines must start with "
            "' ' (context), '-' (remove) or '+' (add); got '?x'"
        ),
        "*** Begin Patch\n*** Update File: exists.txt\n*** End Patch": (
            "'*** Update File: exists.txt' has no hunks; add '@@' hunks"
        ),
        "*** Begin Patch\n*** Add File: exists.txt\n+y\n*** End Patch": (
            "Cannot add 'exists.txt': it already exists; use '*** Update File: exists.txt' "
            "to change it. No file was changed."
        ),
        "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch": (
            "Cannot delete 'gone.txt': it does not exist. No file was changed."
        ),
        "*** Begin Patch\n*** Update File: gone.txt\n@@\n-a\n+b\n*** End Patch": (
            "Cannot update 'gone.txt': it does not exist; use '*** Add File: gone.txt' to "
            "create it. No file was changed."
        ),
    }
    for patch, expected in cases.items():
        assert await run_error("apply_patch", ws, patch=patch) == expected, patch
    assert (ws / "exists.txt").read_text() == "x\n"


async def test_apply_patch_delete_then_add_same_file(ws: Path) -> None:
    (ws / "f.txt").write_text("old\n")
    patch = "*** Begin Patch\n*** Delete File: f.txt\n*** Add File: f.txt\n+new\n*** End Patch"
    assert await run("apply_patch", ws, patch=patch) == "Applied the patch:\nD f.txt\nA f.txt"
    assert (ws / "f.txt").read_text() == "new\n"


async def test_apply_patch_confined(ws: Path, outside: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: ../evil.txt\n+x\n*** End Patch"
    message = await run_error("apply_patch", ws, patch=patch)
    assert message.startswith("Path '../evil.txt' is outside the workspace")
    (ws / "dir_link").symlink_to(outside)
    patch = (
        "*** Begin Patch\n*** Update File: dir_link/secret.txt\n@@\n-top secret\n+pwned\n"
        "*** End Patch"
    )
    message = await run_error("apply_patch", ws, patch=patch)
    assert "leads through a symlink" in message
    (ws / "ok.txt").write_text("a\n")
    patch = "*** Begin Patch\n*** Update File: ok.txt\n*** Move to: /tmp/x.txt\n@@\n-a\n+b\n*** End Patch"
    message = await run_error("apply_patch", ws, patch=patch)
    assert message.startswith("Path '/tmp/x.txt' is outside the workspace")
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert (ws / "ok.txt").read_text() == "a\n"


# --------------------------------------------------------------------------
# grep_files


async def test_grep_files_happy_path(ws: Path) -> None:
    (ws / "b.py").write_text("def beta():\n    return 1\n")
    (ws / "a").mkdir()
    (ws / "a" / "z.py").write_text("x = 1\ndef alpha():\n")
    (ws / "a.txt").write_text("def not_python\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config.py").write_text("def hidden():\n")
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "m.py").write_text("def hidden():\n")
    (ws / "bin.py").write_bytes(b"def x\x00\n")
    out = await run("grep_files", ws, pattern=r"def \w+", include="*.py")
    assert out == "a/z.py:2: def alpha():\nb.py:1: def beta():"
    out = await run("grep_files", ws, pattern="def", path="a.txt")
    assert out == "a.txt:1: def not_python"
    out = await run("grep_files", ws, pattern="return", path="a")
    assert out == "No matches for 'return' in 'a'."


async def test_grep_files_cap(ws: Path) -> None:
    (ws / "f.txt").write_text("hit\n" * 10)
    out = await run("grep_files", ws, pattern="hit", max_results=3)
    assert out == (
        "f.txt:1: hit\nf.txt:2: hit\nf.txt:3: hit\n"
        "[... results capped at 3 matches; narrow the pattern, path or include to see the rest ...]"
    )
    out = await run("grep_files", ws, pattern="hit", max_results=10)
    assert "capped" not in out


async def test_grep_files_invalid_regex(ws: Path) -> None:
    assert await run_error("grep_files", ws, pattern="foo(") == "Invalid regex 'foo(': missing ): foo("


async def test_grep_files_confined(ws: Path, outside: Path) -> None:
    message = await run_error("grep_files", ws, pattern="secret", path="..")
    assert message.startswith("Path '..' is outside the workspace")
    # Symlinks met while walking are not followed out of the workspace.
    (ws / "file_link").symlink_to(outside / "secret.txt")
    (ws / "dir_link").symlink_to(outside)
    (ws / "inside.txt").write_text("secret inside\n")
    (ws / "inside_link").symlink_to(ws / "inside.txt")
    out = await run("grep_files", ws, pattern="secret")
    assert out == "inside.txt:1: secret inside\ninside_link:1: secret inside"


# --------------------------------------------------------------------------
# list_dir


async def test_list_dir_tree(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "deep.py").write_text("")
    (ws / "src" / "main.py").write_text("")
    (ws / "README.md").write_text("")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("")
    (ws / "link").symlink_to("README.md")
    out = await run("list_dir", ws)
    assert out == (
        "./\n"
        "  .git/ (contents not listed)\n"
        "  README.md\n"
        "  link -> README.md\n"
        "  src/\n"
        "    main.py\n"
        "    pkg/"
    )
    assert await run("list_dir", ws, path="src", depth=1) == "src/\n  main.py\n  pkg/"
    assert await run("list_dir", ws, path="src", depth=3) == (
        "src/\n  main.py\n  pkg/\n    deep.py"
    )


async def test_list_dir_cap_and_empty(ws: Path) -> None:
    for i in range(5):
        (ws / f"f{i}").write_text("")
    assert await run("list_dir", ws, max_entries=2) == (
        "./\n  f0\n  f1\n"
        "[... listing capped at 2 entries; list a subdirectory or use a smaller depth ...]"
    )
    (ws / "empty").mkdir()
    assert await run("list_dir", ws, path="empty") == "empty/\n  (empty directory)"


async def test_list_dir_errors_and_confinement(ws: Path, outside: Path) -> None:
    (ws / "f.txt").write_text("")
    assert await run_error("list_dir", ws, path="f.txt") == (
        "'f.txt' is a file, not a directory; use read_file to read it"
    )
    assert await run_error("list_dir", ws, depth=0) == "depth must be 1 or more, got 0"
    message = await run_error("list_dir", ws, path=str(outside))
    assert message.startswith(f"Path '{outside}' is outside the workspace")
    (ws / "dir_link").symlink_to(outside)
    assert "leads through a symlink" in await run_error("list_dir", ws, path="dir_link")


async def test_apply_patch_tolerates_trailing_blank_line(ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\n")
    # The final ' ' line (a blank context line for the last newline) matches nothing.
    patch = "*** Begin Patch\n*** Update File: f.txt\n@@\n a\n-b\n+B\n \n*** End Patch"
    await run("apply_patch", ws, patch=patch)
    assert (ws / "f.txt").read_text() == "a\nB\n"


async def test_apply_patch_first_hunk_without_header(ws: Path) -> None:
    (ws / "f.txt").write_text("x\ny\n")
    patch = "*** Begin Patch\n*** Update File: f.txt\n-x\n+X\n*** End Patch"
    assert await run("apply_patch", ws, patch=patch) == "Applied the patch:\nM f.txt"
    assert (ws / "f.txt").read_text() == "X\ny\n"


async def test_grep_files_include_with_directory_glob(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "tests").mkdir()
    (ws / "src" / "m.py").write_text("needle\n")
    (ws / "tests" / "t.py").write_text("needle\n")
    assert await run("grep_files", ws, pattern="needle", include="src/*.py") == "src/m.py:1: needle"


# --------------------------------------------------------------------------
# Hard links and symlinks: no outside file is read or changed through them


@pytest.fixture
def hard_link(ws: Path, outside: Path) -> Path:
    """``linked.txt`` in the workspace: a hard link to the outside secret."""
    os.link(outside / "secret.txt", ws / "linked.txt")
    return ws / "linked.txt"


def outside_untouched(outside: Path) -> bool:
    return (outside / "secret.txt").read_bytes() == b"top secret\n"


async def test_read_file_refuses_hard_links(ws: Path, outside: Path, hard_link: Path) -> None:
    assert await run_error("read_file", ws, file_path="linked.txt") == (
        "'linked.txt' has 2 hard links (the same file under other names, possibly outside the "
        "workspace), so read_file does not read it"
    )


async def test_grep_files_skips_hard_links(ws: Path, outside: Path, hard_link: Path) -> None:
    (ws / "inside.txt").write_text("secret inside\n")
    assert await run("grep_files", ws, pattern="secret") == (
        "inside.txt:1: secret inside\n"
        "[1 file was not searched because it has more than one hard link (other names of the "
        "same file may lie outside the workspace): linked.txt]"
    )
    assert await run("grep_files", ws, pattern="secret", path="linked.txt") == (
        "No matches for 'secret' in 'linked.txt'.\n"
        "[1 file was not searched because it has more than one hard link (other names of the "
        "same file may lie outside the workspace): linked.txt]"
    )
    for i in range(6):
        os.link(outside / "secret.txt", ws / f"more{i}.txt")
    out = await run("grep_files", ws, pattern="top")
    assert out == (
        "No matches for 'top' in '.'.\n"
        "[7 files were not searched because they have more than one hard link (other names of "
        "the same file may lie outside the workspace): linked.txt, more0.txt, more1.txt, "
        "more2.txt, more3.txt and 2 more]"
    )


async def test_write_file_replaces_hard_links(ws: Path, outside: Path, hard_link: Path) -> None:
    assert await run("write_file", ws, file_path="linked.txt", content="mine\n") == (
        "Wrote 5 bytes to linked.txt"
    )
    assert outside_untouched(outside)
    assert hard_link.read_text() == "mine\n"
    assert os.stat(outside / "secret.txt").st_nlink == 1


async def test_apply_patch_does_not_touch_hard_linked_files(
    ws: Path, outside: Path, hard_link: Path
) -> None:
    refusal = (
        "'linked.txt' has 2 hard links (the same file under other names, possibly outside the "
        "workspace), so apply_patch does not read it or change it. No file was changed."
    )
    update = "*** Begin Patch\n*** Update File: linked.txt\n@@\n-top secret\n+pwned\n*** End Patch"
    assert await run_error("apply_patch", ws, patch=update) == refusal
    # A move without hunks would copy the content into a file read_file can read.
    move = "*** Begin Patch\n*** Update File: linked.txt\n*** Move to: copy.txt\n*** End Patch"
    assert await run_error("apply_patch", ws, patch=move) == refusal
    assert not (ws / "copy.txt").exists()
    add = "*** Begin Patch\n*** Add File: linked.txt\n+x\n*** End Patch"
    assert "Cannot add 'linked.txt': it already exists" in await run_error("apply_patch", ws, patch=add)
    assert outside_untouched(outside)
    # Deleting removes the workspace's name only.
    delete = "*** Begin Patch\n*** Delete File: linked.txt\n*** End Patch"
    assert await run("apply_patch", ws, patch=delete) == "Applied the patch:\nD linked.txt"
    assert not os.path.lexists(hard_link)
    assert outside_untouched(outside)


async def test_writes_replace_files_and_keep_their_mode(ws: Path) -> None:
    script_file = ws / "run.sh"
    script_file.write_text("echo a\n")
    script_file.chmod(0o750)
    patch = "*** Begin Patch\n*** Update File: run.sh\n@@\n-echo a\n+echo b\n*** End Patch"
    await run("apply_patch", ws, patch=patch)
    assert script_file.read_text() == "echo b\n"
    assert script_file.stat().st_mode & 0o777 == 0o750
    await run("write_file", ws, file_path="run.sh", content="echo c\n")
    assert script_file.stat().st_mode & 0o777 == 0o750
    # No temporary file is left behind.
    assert sorted(p.name for p in ws.iterdir()) == ["run.sh"]


async def test_apply_patch_delete_symlink_removes_the_link(ws: Path, outside: Path) -> None:
    (ws / "real.txt").write_text("keep me\n")
    (ws / "inside_link").symlink_to(ws / "real.txt")
    (ws / "outside_link").symlink_to(outside / "secret.txt")
    (ws / "outside_dir_link").symlink_to(outside)
    (ws / "dangling").symlink_to(ws / "nothing-here")
    through = "*** Begin Patch\n*** Delete File: outside_dir_link/secret.txt\n*** End Patch"
    assert "leads through a symlink" in await run_error("apply_patch", ws, patch=through)
    patch = (
        "*** Begin Patch\n*** Delete File: inside_link\n*** Delete File: outside_link\n"
        "*** Delete File: outside_dir_link\n*** Delete File: dangling\n*** End Patch"
    )
    assert await run("apply_patch", ws, patch=patch) == (
        "Applied the patch:\nD inside_link\nD outside_link\nD outside_dir_link\nD dangling"
    )
    assert sorted(p.name for p in ws.iterdir()) == ["real.txt"]
    assert (ws / "real.txt").read_text() == "keep me\n"
    assert outside_untouched(outside)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_apply_patch_move_of_symlink_keeps_the_target(ws: Path) -> None:
    (ws / "real.txt").write_text("one\n")
    (ws / "link").symlink_to("real.txt")
    patch = "*** Begin Patch\n*** Update File: link\n*** Move to: moved.txt\n@@\n-one\n+two\n*** End Patch"
    assert await run("apply_patch", ws, patch=patch) == (
        "Applied the patch:\nM moved.txt (moved from real.txt)"
    )
    assert not os.path.lexists(ws / "link")
    assert (ws / "real.txt").read_text() == "one\n"
    assert (ws / "moved.txt").read_text() == "two\n"


async def test_grep_files_rejects_what_re2_does_not_support(ws: Path) -> None:
    (ws / "f.txt").write_text("aa\n")
    assert await run_error("grep_files", ws, pattern=r"(a)\1") == (
        r"Invalid regex '(a)\\1': backreferences such as \1 are not supported. grep_files uses "
        "RE2 syntax (no backreferences or lookaround); rewrite the pattern without it"
    )
    assert await run_error("grep_files", ws, pattern="a(?=a)") == (
        "Invalid regex 'a(?=a)': lookahead ((?=...) and (?!...)) is not supported. grep_files "
        "uses RE2 syntax (no backreferences or lookaround); rewrite the pattern without it"
    )
    assert await run_error("grep_files", ws, pattern="(?<!b)a") == (
        "Invalid regex '(?<!b)a': lookbehind ((?<=...) and (?<!...)) is not supported. "
        "grep_files uses RE2 syntax (no backreferences or lookaround); rewrite the pattern "
        "without it"
    )
    # A huge pattern is not echoed back whole.
    message = await run_error("grep_files", ws, pattern="(" * 5000)
    assert message.startswith("Invalid regex '((((") and len(message) < 1000


async def test_grep_files_matches_line_by_line(ws: Path) -> None:
    # The whole file is searched at once: matches must still stay within a
    # line, and ^, $, \A and \z must mean what they mean for one line.
    (ws / "f.txt").write_bytes(b"foo\r\n  foo bar\n\nbar foo\rend\n")
    cases = {
        "^foo": ["1: foo"],
        "foo$": ["1: foo", "4: bar foo"],
        "^$": ["3: "],
        r"foo\sbar": ["2:   foo bar"],
        r"o\s+\w": ["2:   foo bar"],
        r"\Afoo": ["1: foo"],
        r"bar\z": ["2:   foo bar"],
        "(a+)+$": [],
    }
    for pattern, lines in cases.items():
        out = await run("grep_files", ws, pattern=pattern)
        expected = "\n".join(f"f.txt:{line}" for line in lines) or (
            f"No matches for {pattern!r} in '.'."
        )
        assert out == expected, pattern


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
@pytest.mark.parametrize("path", ["a" * 5000, "/".join(["d"] * 3000)], ids=["long-name", "deep-path"])
async def test_a_name_or_path_too_long_is_refused_in_the_tools_words(ws: Path, tool: str, path: str) -> None:
    arguments = {"file_path": path, **({"content": "x"} if tool == "write_file" else {})}
    message = await run_error(tool, ws, **arguments)
    assert "Errno" not in message and str(ws) not in message, message
    if path.startswith("a"):
        assert message.endswith("has a name of 5,000 bytes ('" + "a" * 17 + "…[4,983 characters cut]'); file names "
                                "are at most 255 bytes here: use a shorter name"), message
    else:
        assert "(3,000 levels)" in message and message.endswith("bytes here: use a shorter path"), message
    assert message.startswith("Path '" + path[:37] + "…[")


# Which workspaces a run may use -------------------------------------------------------

from agentloop.activities.builtin_tools.workspace import workspace_problem  # noqa: E402

WORKER_DIRS = {"its working directory": Path("/srv/app"), "its Python environment": Path("/srv/app/.venv"),
               "its data directory": Path("/home/svc/.agentloop")}


def problem(ws: str, *, default: str = "/srv/app", roots: list[str] | None = None) -> str | None:
    return workspace_problem(Path(ws), default=Path(default), roots=[Path(r) for r in roots] if roots else None,
                             home=Path("/home/svc"), worker_dirs=WORKER_DIRS)


@pytest.mark.parametrize(("ws", "start"), [
    ("/", "workspace / is the root directory: a run's commands could read and write everything in it"),
    ("/home", "workspace /home is a directory many share"),
    ("/tmp", "workspace /tmp is a directory many share"),
    ("/etc/nginx", "workspace /etc/nginx is in /etc, a system directory"),
    ("/usr", "workspace /usr is in /usr, a system directory"),
    ("/var/run/docker", "workspace /var/run/docker is in /run, a system directory"),  # resolved
    ("/home/svc", "workspace /home/svc is the home directory of the worker's user (/home/svc)"),
    ("/srv", "workspace /srv is a directory many share"),
])
def test_system_shared_and_home_directories_are_refused(ws: str, start: str) -> None:
    assert (problem(ws) or "").startswith(start), problem(ws)


def test_an_ancestor_of_the_workers_own_directories_is_refused_unless_it_is_its_workspace() -> None:
    # /srv/app holds the worker's venv: refused for a run, unless the operator made it the worker's workspace.
    assert problem("/srv/app", default="/srv/other") == (
        "workspace /srv/app holds the worker's own files (its Python environment, /srv/app/.venv): its commands "
        "could change the worker; use a directory beside them")
    assert problem("/srv/app") is None
    assert problem("/srv/app/project", default="/srv/other") is None  # inside, not above: fine
    assert problem("/home/svc/projects/x", default="/srv/other") is None


def test_a_workspace_lies_strictly_inside_a_root() -> None:
    roots = ["/data/ws"]
    assert problem("/data/ws/run-1", roots=roots) is None
    assert problem("/data/ws/run-1/sub", roots=roots) is None
    assert problem("/data/ws", roots=roots) == (
        "workspace /data/ws is one of the directories this worker allows (AGENTLOOP_WORKSPACE_ROOTS or the "
        "worker's workspace: /data/ws); a root holds the workspaces of many runs: use a directory inside it")
    assert (problem("/data/other", roots=roots) or "").startswith("workspace /data/other is outside the directories")
    assert (problem("/data", roots=roots) or "").startswith("workspace /data is outside the directories")
    # The worker's own workspace (its default) stays usable: `agentloop run --workspace .`.
    assert problem("/srv/app", roots=["/srv/app"]) is None
