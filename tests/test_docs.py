"""README.md runs as written.

Every ```python block of README.md has a marker on the line right before it,
an HTML comment (invisible when rendered) that says how it is checked here. A
block without one fails ``test_every_python_block_is_marked``, so no block
goes unchecked. Clauses are separated by ``;``:

``<!-- readme-test: offline -->`` (optionally ``offline, expect "TEXT"``)
    A complete script, run for real: saved in a temporary directory next to
    the README's ``file`` blocks and run by this venv's Python, with
    ``TEMPORAL_ADDRESS`` of the session's dev server and
    ``AGENTLOOP_TASK_QUEUE`` of a worker in this process (built-in tools,
    ``scripted:demo``), as a user runs it against ``agentloop dev``. It must
    exit 0 (and print TEXT).
``<!-- readme-test: file NAME.py -->``
    Saved as NAME.py for the blocks that import it (blocks naming the same
    file are appended in order, as "continued" blocks are), and imported.
``<!-- readme-test: pytest NAME.py -->``
    Saved as NAME.py and run with pytest in that directory; it must pass.
``<!-- readme-test: needs VARIABLE -->``
    Needs a provider key (e.g. ``OPENAI_API_KEY``) to run: compiled, and its
    imports run. With ``file NAME.py`` it is also saved (and imported).
``<!-- readme-test: fragment NAME: TYPE, ... -->``
    A few lines that continue the prose, top-level ``await`` allowed:
    compiled, its imports run, every name it reads is bound in it, a builtin
    or declared in the marker, and every attribute it takes of a declared
    name exists on the name's TYPE (a name exported by ``agentloop``, or a
    builtin type).

Shell commands are not run, but every ``agentloop`` and ``temporal`` command
in the README's shell blocks and code spans must exist, with the options it
is given (``agentloop SUB --help``, ``temporal PATH --help``). Also checked:
every ``#anchor`` link leads to a heading, the Python requirement is
pyproject's, and the test command is the one ``.ci/run`` runs.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import functools
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import agentloop
from agentloop.devserver import DevServer

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
MARKER = re.compile(r"^<!-- readme-test: (.*) -->$")


@dataclass
class Check:
    """How a block is checked: the parsed marker."""

    offline: bool = False
    expect: str | None = None
    file: str | None = None
    pytest: bool = False
    needs: list[str] = field(default_factory=list)
    fragment: dict[str, str] | None = None


@dataclass
class Block:
    lang: str
    code: str
    line: int                       # of the opening fence, 1-based
    marker: str | None              # the marker's text, None when there is none

    @property
    def label(self) -> str:
        first = self.code.splitlines()[0] if self.code else ""
        name = re.match(r"# ([\w.]+\.py)", first)
        return f"L{self.line}-{name.group(1) if name else 'block'}"


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block, with the marker on the line before its fence."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^```(\S*)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        before = MARKER.match(lines[start - 1]) if start else None
        blocks.append(Block(opening.group(1), "\n".join(body) + "\n", start + 1,
                            before.group(1).strip() if before else None))
        i += 1
    return blocks


def parse_marker(text: str) -> Check:
    """The marker's clauses (see the module docstring); ValueError if wrong."""
    check = Check()
    for clause in (c.strip() for c in text.split(";")):
        word, _, rest = clause.partition(" ")
        rest = rest.strip()
        if word in ("offline", "offline,"):
            check.offline = True
            expect = re.fullmatch(r',?\s*expect "(.*)"', rest) if rest else None
            if rest and not expect:
                raise ValueError(f"after 'offline' only ', expect \"TEXT\"' may follow, not {rest!r}")
            check.expect = expect.group(1) if expect else None
        elif word == "file" and re.fullmatch(r"\w+\.py", rest):
            check.file = rest
        elif word == "pytest" and re.fullmatch(r"test_\w+\.py", rest):
            check.pytest, check.file = True, rest
        elif word == "needs" and re.fullmatch(r"[A-Z_]+(\s*,\s*[A-Z_]+)*", rest):
            check.needs = [v.strip() for v in rest.split(",")]
        elif word == "fragment":
            declared = {}
            for decl in filter(None, (d.strip() for d in rest.split(","))):
                name, _, type_name = (p.strip() for p in decl.partition(":"))
                if not name.isidentifier() or not type_name:
                    raise ValueError(f"a fragment declares 'name: TYPE', not {decl!r}")
                declared[name] = type_name
            check.fragment = declared
        else:
            raise ValueError(f"unknown clause {clause!r}")
    kinds = [check.offline, check.pytest, bool(check.needs), check.fragment is not None]
    if sum(kinds) > 1:
        raise ValueError("a block is offline, pytest, needs or fragment: one of them")
    if sum(kinds) == 0 and not check.file:
        raise ValueError("the marker says nothing about how to check the block")
    if check.fragment is not None and check.file:
        raise ValueError("a fragment is not a file")
    return check


def readme_text() -> str:
    return README.read_text()


def python_blocks(text: str | None = None) -> list[Block]:
    return [b for b in fenced_blocks(readme_text() if text is None else text) if b.lang == "python"]


PYTHON_BLOCKS = python_blocks()


# --------------------------------------------------------------------------- markers

def test_every_python_block_is_marked() -> None:
    problems = []
    for block in python_blocks():
        if block.marker is None:
            problems.append(f"README.md:{block.line}: no <!-- readme-test: ... --> marker on the line before")
            continue
        try:
            parse_marker(block.marker)
        except ValueError as err:
            problems.append(f"README.md:{block.line}: {err}")
    assert problems == [], "\n".join(problems)


def test_an_unmarked_or_misspelt_block_is_caught() -> None:
    # The scanner itself: what a new, unmarked block looks like to it.
    text = "Intro\n\n```python\nprint(1)\n```\n\n<!-- readme-test: ofline -->\n```python\nprint(2)\n```\n"
    first, second = python_blocks(text)
    assert first.marker is None
    with pytest.raises(ValueError, match="unknown clause"):
        parse_marker(second.marker or "")
    assert parse_marker('offline, expect "a b"') == Check(offline=True, expect="a b")
    assert parse_marker("file x.py; needs OPENAI_API_KEY") == Check(file="x.py", needs=["OPENAI_API_KEY"])


# --------------------------------------------------------------------------- running blocks

def files_of(blocks: list[Block]) -> dict[str, str]:
    """The README's files, as a user following it has them saved."""
    files: dict[str, str] = {}
    for block in blocks:
        if block.marker is None:
            continue
        check = parse_marker(block.marker)
        if check.file:
            files[check.file] = files.get(check.file, "") + block.code
    return files


async def run_python(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 240) -> tuple[int, str]:
    """Run this venv's Python in a subprocess without blocking the event loop
    (the worker of this process keeps serving meanwhile)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, output.decode(errors="replace")


def imports_of(code: str) -> str:
    """The block's import statements, as code."""
    tree = ast.parse(code)
    return "\n".join(ast.unparse(node) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def compile_block(block: Block, top_level_await: bool = False) -> ast.Module:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if top_level_await else 0
    compile(block.code, f"README.md:{block.line}", "exec", flags=flags)
    return ast.parse(block.code)


def resolve_type(name: str) -> Any:
    if hasattr(agentloop, name):
        return getattr(agentloop, name)
    if isinstance(getattr(builtins, name, None), type):
        return getattr(builtins, name)
    raise AssertionError(f"a fragment declares type {name!r}, which agentloop does not export")


def fragment_problems(block: Block, declared: dict[str, str]) -> list[str]:
    """Names a fragment reads but nobody binds, and attributes its declared
    names do not have."""
    tree = compile_block(block, top_level_await=True)
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    problems = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                and node.id not in bound and node.id not in declared and not hasattr(builtins, node.id)):
            problems.append(f"line {node.lineno}: {node.id!r} is neither bound nor declared")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in declared:
            owner = resolve_type(declared[node.value.id])
            if not hasattr(owner, node.attr):
                problems.append(f"line {node.lineno}: {owner.__name__} has no attribute {node.attr!r}")
    return problems


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.label for b in PYTHON_BLOCKS])
async def test_python_block(
    block: Block, dev_server: DevServer, worker: Callable[..., Any], task_queue: str, workspace: Path,
    tmp_path: Path,
) -> None:
    if block.marker is None:
        pytest.fail(f"README.md:{block.line} has no readme-test marker (see tests/test_readme.py)")
    check = parse_marker(block.marker)
    work = tmp_path / "readme"
    work.mkdir()
    for name, code in files_of(PYTHON_BLOCKS).items():
        (work / name).write_text(code)
    # What a user following the README has: a server, and a worker (agentloop
    # dev's) whose workspace holds a file for the demo model to read.
    (workspace / "README.md").write_text("# A project the demo model reads about\n")
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TEMPORAL_ADDRESS": dev_server.address,
        "AGENTLOOP_TASK_QUEUE": task_queue,
    }
    where = f"README.md:{block.line} ({block.marker})"

    if check.fragment is not None:
        problems = fragment_problems(block, check.fragment)
        assert problems == [], f"{where}:\n" + "\n".join(problems)
        code, output = await run_python(["-c", imports_of(block.code)], work, env)
        assert code == 0, f"{where}: its imports fail:\n{output}"
    elif check.needs:
        compile_block(block)
        code, output = await run_python(["-c", imports_of(block.code)], work, env)
        assert code == 0, f"{where}: its imports fail:\n{output}"
        if check.file:
            code, output = await run_python(["-c", f"import {Path(check.file).stem}"], work, env)
            assert code == 0, f"{where}: importing {check.file} fails:\n{output}"
    elif check.pytest:
        await dev_server.wait_ready()
        code, output = await run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider", check.file or ""], work, env)
        assert code == 0, f"{where}: pytest failed:\n{output}"
        assert " passed" in output and "failed" not in output, output
    elif check.offline:
        compile_block(block)
        script = work / f"readme_block_{block.line}.py"
        script.write_text(block.code)
        await dev_server.wait_ready()
        async with worker():
            code, output = await run_python([script.name], work, env)
        assert code == 0, f"{where}: exit {code}:\n{output}"
        assert "Traceback" not in output, f"{where}:\n{output}"
        if check.expect is not None:
            assert check.expect in output, f"{where}: {check.expect!r} not in its output:\n{output}"
    else:  # a file only: it must import
        compile_block(block)
        code, output = await run_python(["-c", f"import {Path(check.file or '').stem}"], work, env)
        assert code == 0, f"{where}: importing {check.file} fails:\n{output}"


# --------------------------------------------------------------------------- shell commands

def outside_fences(text: str) -> str:
    return re.sub(r"^```.*?^```$", "", text, flags=re.DOTALL | re.MULTILINE)


def command_lines() -> list[tuple[str, str]]:
    """(where, command line) of the shell blocks' lines, the plain blocks'
    lines that start with a command, and the code spans of the prose."""
    text = readme_text()
    found = []
    for block in fenced_blocks(text):
        lines = block.code.replace("\\\n", " ").splitlines()
        # A plain block is a synopsis when each line is a command or continues one
        # (an output sample such as "agentloop worker: stopped" is not).
        synopsis = block.lang == "" and all(re.match(r"(agentloop [a-z]+(\s|$)|\s|$)", line) for line in lines)
        if block.lang in ("bash", "sh", "shell") or synopsis:
            found += [(f"README.md:{block.line + 1 + n}", line) for n, line in enumerate(lines)]
    for span in re.findall(r"`([^`]+)`", outside_fences(text)):
        if re.search(r"(^|\s|/)(agentloop|temporal) ", span):
            found.append(("a code span", span.replace("\n", " ")))
    return found


def tokens_of(line: str) -> list[str]:
    # Synopses write alternatives as [--a | --b]: not a pipe.
    line = re.sub(r"\s\|\s(?=\[?-)", " ", line).replace("[", " ").replace("]", " ")
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError:  # an unbalanced quote in prose: split on spaces
        return line.split("#")[0].split()


def commands_in(line: str, program: str) -> list[list[str]]:
    """Each invocation of ``program`` in the line: its arguments, up to the
    next shell operator."""
    tokens = tokens_of(line)
    found = []
    for i, token in enumerate(tokens):
        if token == program or token.endswith("/" + program):
            args = []
            for arg in tokens[i + 1:]:
                if arg in ("&&", "||", "|", ";", "&", ">", ">>", "<", "2>", ")"):
                    break
                args.append(arg)
            found.append(args)
    return found


@functools.cache
def help_text(*command: str) -> tuple[int, str]:
    proc = subprocess.run([str(BIN / command[0]), *command[1:], "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@functools.cache
def temporal_options() -> str:
    proc = subprocess.run([str(BIN / "temporal"), "options"], capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout


def has_option(help_output: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_output) is not None


def options_of(args: list[str]) -> list[str]:
    return [a.split("=")[0] for a in args if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", a)]


def test_agentloop_commands_in_the_readme_exist() -> None:
    code, top = help_text("agentloop")
    assert code == 0, top
    subcommands = set(re.search(r"\{([a-z,]+)\}", top).group(1).split(","))
    with ThreadPoolExecutor(4) as pool:  # each --help starts a Python: ask them at once
        list(pool.map(lambda sub: help_text("agentloop", sub), sorted(subcommands)))
    problems, seen = [], 0
    for where, line in command_lines():
        for args in commands_in(line, "agentloop"):
            if not args:
                continue
            sub = args[0]
            if "/" in sub:  # "agentloop approve/submit/stop" names several
                problems += [f"{where}: `agentloop {s}` is no subcommand" for s in sub.split("/") if s not in subcommands]
                continue
            if sub.startswith("-"):
                options, helped = options_of(args), top
            elif sub not in subcommands:
                problems.append(f"{where}: `agentloop {sub}` is no subcommand ({line.strip()})")
                continue
            else:
                code, helped = help_text("agentloop", sub)
                assert code == 0, helped
                options = options_of(args[1:])
            seen += 1
            problems += [f"{where}: `agentloop {sub}` has no option {o} ({line.strip()})"
                         for o in options if not has_option(helped, o)]
    assert problems == [], "\n".join(problems)
    assert seen > 30  # the scan found the README's commands


def test_temporal_commands_in_the_readme_exist() -> None:
    problems, seen = [], 0
    for where, line in command_lines():
        for args in commands_in(line, "temporal"):
            path = []
            for arg in args:
                if not re.fullmatch(r"[a-z][a-z-]*", arg):
                    break
                path.append(arg)
            if not path:
                continue  # "the `temporal` CLI"
            code, helped = help_text("temporal", *path)
            seen += 1
            if code != 0 or f"temporal {' '.join(path)} [flags]" not in helped:
                problems.append(f"{where}: `temporal {' '.join(path)}` is no command ({line.strip()})")
                continue
            # Connection options (--address, --namespace...) are listed by `temporal options`.
            problems += [f"{where}: `temporal {' '.join(path)}` has no option {o}"
                         for o in options_of(args[len(path):])
                         if not has_option(helped, o) and not has_option(temporal_options(), o)]
    assert problems == [], "\n".join(problems)
    assert seen > 15


def test_the_command_scan_catches_a_wrong_command() -> None:
    assert commands_in('X=1 agentloop run "a # b" --model m --yes && agentloop list | jq .', "agentloop") == [
        ["run", "a # b", "--model", "m", "--yes"], ["list"]]
    assert options_of(commands_in("agentloop approve RUN C [--deny | --skip] [--reason TEXT]", "agentloop")[0]) == [
        "--deny", "--skip", "--reason"]
    _, helped = help_text("agentloop", "run")
    assert has_option(helped, "--model") and not has_option(helped, "--modle")


# --------------------------------------------------------------------------- the rest

def github_anchor(heading: str) -> str:
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def readme_anchors() -> set[str]:
    """The anchors of README.md's headings, numbered as GitHub numbers repeats."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", outside_fences(readme_text()), flags=re.MULTILINE):
        anchor = github_anchor(heading)
        n = 0
        while (anchor if n == 0 else f"{anchor}-{n}") in anchors:
            n += 1
        anchors.add(anchor if n == 0 else f"{anchor}-{n}")
    return anchors


def test_every_anchor_link_leads_to_a_heading() -> None:
    anchors = readme_anchors()
    links = re.findall(r"\]\(#([^)]+)\)", outside_fences(readme_text()))
    assert len(links) > 20
    assert sorted({link for link in links if link not in anchors}) == []
    assert github_anchor("Following a run: `run`, `watch` and `--jsonl`") == "following-a-run-run-watch-and---jsonl"


def test_the_measurement_log_and_the_readme_link_each_other() -> None:
    """README's links to files lead to files, and benchmarks/README.md (the
    measurement log its Performance section points to) links only to
    README headings that exist."""
    files = re.findall(r"\]\(([A-Za-z][^)#:]*)\)", outside_fences(readme_text()))
    assert "benchmarks/README.md" in files
    assert sorted(f for f in files if not (ROOT / f).is_file()) == []
    log = (ROOT / "benchmarks" / "README.md").read_text()
    links = re.findall(r"\]\(\.\./README\.md#([^)]+)\)", outside_fences(log))
    assert "performance" in links
    assert sorted(set(links) - readme_anchors()) == []


def test_the_python_requirement_is_pyprojects() -> None:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    version = re.fullmatch(r">=\s*(3\.\d+)", requires).group(1)
    stated = re.findall(r"Python (3\.\d+) or newer", readme_text())
    assert stated == [version], (stated, requires)
    assert sys.version_info >= tuple(int(p) for p in version.split("."))


def test_the_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    blocks = fenced_blocks(readme_text())
    first_screen = next(b.code.strip() for b in blocks if b.lang == "bash" and b.code.strip().endswith("pytest"))
    assert first_screen == ci
    tests_section = readme_text().split("\n## Tests\n", 1)[1]
    assert tests_section.lstrip().startswith("```bash\n.venv/bin/pytest\n```"), tests_section[:200]
    assert ci.endswith("&& .venv/bin/pytest")
    assert "tests/test_readme.py" in tests_section


def test_the_readme_speaks_of_the_product() -> None:
    # Not of the design documents it was built from.
    assert re.findall(r"(?i)\bseed \d+", readme_text()) == []
