"""README.md and the pages of docs/ run as written.

The pages checked are README.md and every docs/*.md. Every ```python block
of a page has a marker on the line right before it, an HTML comment
(invisible when rendered) that says how it is checked here. A block without
one fails ``test_every_python_block_is_marked``, so no block goes unchecked.
Clauses are separated by ``;``:

``<!-- readme-test: offline -->`` (optionally ``offline, expect "TEXT"``)
    A complete script, run for real: saved in a temporary directory next to
    its page's ``file`` blocks and run by this venv's Python, with
    ``TEMPORAL_ADDRESS`` of the session's dev server and
    ``AGENTLOOP_TASK_QUEUE`` of a worker in this process (built-in tools,
    ``scripted:demo``), as a user runs it against ``agentloop dev``. It must
    exit 0 without a traceback or a warning (and print TEXT).
``<!-- readme-test: file NAME.py -->``
    Saved as NAME.py for the blocks of the same page that import it (blocks
    naming the same file are appended in order, as "continued" blocks are),
    and imported. Files are collected per page: a page holds every file its
    blocks import, as a reader following that one page has them saved.
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
in the pages' shell blocks and code spans must exist, with the options it
is given (``agentloop SUB --help``, ``temporal PATH --help``). Also checked:
every link of a page (``#anchor``, ``other.md``, ``other.md#anchor``, and
README's ``docs/PAGE.md#anchor``) leads to a file and a heading that exist,
and the pages of docs/ link only to pages of docs/; headings are unique
within a page (so GitHub and MkDocs give them the same anchors); every
repository path a page names (``agentloop/...``, ``tests/...``, ... in a code
span or a link, in README.md, docs/ and the folders' README.md) exists; examples
import user-facing names from ``agentloop``; the README stays a short front
page; benchmarks/README.md says how to run each benchmark, and
docs/performance.md gives each table its date, machine and command; the
Python requirement is pyproject's, and the test command is the one
``.ci/run`` runs.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import functools
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import agentloop
from agentloop.workers.devserver import DevServer

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
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
    page: str = "README.md"         # the page it is on, relative to the repository

    @property
    def label(self) -> str:
        first = self.code.splitlines()[0] if self.code else ""
        name = re.match(r"# ([\w.]+\.py)", first)
        return f"{self.page}:L{self.line}-{name.group(1) if name else 'block'}"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced_blocks(text: str, page: str = "README.md") -> list[Block]:
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
                            before.group(1).strip() if before else None, page))
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


def pages() -> list[str]:
    """The pages checked: README.md, then docs/*.md, relative to the repository."""
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in DOCS.glob("*.md"))]


def page_text(page: str) -> str:
    return (ROOT / page).read_text()


def readme_text() -> str:
    return README.read_text()


def python_blocks(text: str | None = None, page: str = "README.md") -> list[Block]:
    """The python blocks of one text (a page's, by default README's)."""
    return [b for b in fenced_blocks(page_text(page) if text is None else text, page) if b.lang == "python"]


def all_python_blocks() -> list[Block]:
    return [block for page in pages() for block in python_blocks(page=page)]


PYTHON_BLOCKS = all_python_blocks()


# --------------------------------------------------------------------------- markers

def test_every_python_block_is_marked() -> None:
    problems = []
    for block in all_python_blocks():
        if block.marker is None:
            problems.append(f"{block.where}: no <!-- readme-test: ... --> marker on the line before")
            continue
        try:
            parse_marker(block.marker)
        except ValueError as err:
            problems.append(f"{block.where}: {err}")
    assert problems == [], "\n".join(problems)
    assert len(pages()) > 10 and len(PYTHON_BLOCKS) >= 31  # the scan found the docs and their examples


def test_a_page_imports_only_its_own_files() -> None:
    """A block that imports a module saved by a ``file`` block finds it on its own page."""
    saved = {page: files_of(python_blocks(page=page)) for page in pages()}
    everywhere = {Path(name).stem for files in saved.values() for name in files}
    problems = []
    for block in PYTHON_BLOCKS:
        for node in ast.walk(ast.parse(block.code)):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for module in modules:
                if module in everywhere and module + ".py" not in saved[block.page]:
                    problems.append(f"{block.where}: imports {module}, saved on another page")
    assert problems == [], "\n".join(problems)


# Modules whose names the examples import as they are; every other
# user-facing name comes from ``agentloop`` itself.
SUBMODULES_IMPORTED = ("agentloop.testing", "agentloop.in_workflow", "agentloop.shared.runs.threads",
                       "agentloop.activities.", "agentloop.client.evals", "agentloop.shared.evals.")


def test_examples_import_user_facing_names_from_agentloop() -> None:
    problems = []
    for block in PYTHON_BLOCKS:
        for node in ast.walk(ast.parse(block.code)):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            if module.startswith("agentloop.") and not module.startswith(SUBMODULES_IMPORTED):
                problems.append(f"{block.where}: from {module} import ...: import it from agentloop")
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
    """A page's files, as a user following it has them saved."""
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
    compile(block.code, block.where, "exec", flags=flags)
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


async def server_time(dev_server: DevServer) -> str:
    """Now, as a list filter's time (the session's server runs on this machine, on its clock)."""
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def runs_left_open(dev_server: DevServer, since: str, own_queue: str) -> list[str]:
    """Runs started since ``since`` that are still open on another task queue than ``own_queue``."""
    from temporalio.client import Client

    client = await Client.connect(dev_server.address)
    left = []
    async for run in client.list_workflows(f'ExecutionStatus="Running" AND StartTime >= "{since}"'):
        if run.task_queue != own_queue:
            left.append(f"{run.id} on {run.task_queue!r}")
    return left


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.label for b in PYTHON_BLOCKS])
async def test_python_block(
    block: Block, dev_server: DevServer, worker: Callable[..., Any], task_queue: str, workspace: Path,
    tmp_path: Path,
) -> None:
    if block.marker is None:
        pytest.fail(f"{block.where} has no readme-test marker (see tests/test_docs.py)")
    check = parse_marker(block.marker)
    work = tmp_path / "docs"
    work.mkdir()
    for name, code in files_of(python_blocks(page=block.page)).items():
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
    where = f"{block.where} ({block.marker})"

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
        script = work / f"{Path(block.page).stem.replace('-', '_').lower()}_block_{block.line}.py"
        script.write_text(block.code)
        await dev_server.wait_ready()
        since = await server_time(dev_server)
        async with worker():
            code, output = await run_python([script.name], work, env)
        assert code == 0, f"{where}: exit {code}:\n{output}"
        assert "Traceback" not in output, f"{where}:\n{output}"
        # What an example opens on a task queue of its own, no worker polls once it exits: it closes it.
        left = await runs_left_open(dev_server, since, task_queue)
        assert left == [], f"{where}: leaves runs open on task queues no worker polls any more: {left}"
        assert "Warning:" not in output, f"{where}: an example runs without warnings:\n{output}"
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
    """(where, command line) of the pages' shell blocks' lines, the plain
    blocks' lines that start with a command, and the code spans of the prose."""
    found = []
    for page in pages():
        text = page_text(page)
        for block in fenced_blocks(text, page):
            lines = block.code.replace("\\\n", " ").splitlines()
            # A plain block is a synopsis when each line is a command or continues one
            # (an output sample such as "agentloop worker: stopped" is not).
            synopsis = block.lang == "" and all(re.match(r"(agentloop [a-z]+(\s|$)|\s|$)", line) for line in lines)
            if block.lang in ("bash", "sh", "shell") or synopsis:
                found += [(f"{page}:{block.line + 1 + n}", line) for n, line in enumerate(lines)]
        for span in re.findall(r"`([^`]+)`", outside_fences(text)):
            if re.search(r"(^|\s|/)(agentloop|temporal) ", span):
                found.append((f"a code span of {page}", span.replace("\n", " ")))
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


def test_agentloop_commands_in_the_docs_exist() -> None:
    code, top = help_text("agentloop")
    assert code == 0, top
    subcommands = set(re.search(r"\{([a-z,-]+)\}", top).group(1).split(","))
    with ThreadPoolExecutor(4) as pool:  # each --help starts a Python: ask them at once
        list(pool.map(lambda sub: help_text("agentloop", sub), sorted(subcommands)))
    problems, seen = [], 0
    for where, line in command_lines():
        for args in commands_in(line, "agentloop"):
            if not args:
                continue
            sub = args[0]
            if "/" in sub:  # "agentloop approve/submit/stop" names several
                problems += [f"{where}: `agentloop {s}` is no subcommand"
                             for s in sub.split("/") if s not in subcommands]
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
                actions = re.search(r"\{([a-z,]+)\}", helped) if sub in ("schedule", "eval", "lanes", "quota") else None
                if actions and len(args) > 1 and args[1] in actions.group(1).split(","):
                    # `agentloop schedule ACTION`, `agentloop lanes set`: the action's own options
                    code, helped = help_text("agentloop", sub, args[1])
                    assert code == 0, helped
                    options = options_of(args[2:])
            seen += 1
            problems += [f"{where}: `agentloop {sub}` has no option {o} ({line.strip()})"
                         for o in options if not has_option(helped, o)]
    assert problems == [], "\n".join(problems)
    assert seen > 30  # the scan found the pages' commands


def test_temporal_commands_in_the_docs_exist() -> None:
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
    """The anchor GitHub gives a heading; mkdocs.yml's toc slugify
    (pymdownx.slugs, lower case) gives the same."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def heading_anchors(page: str) -> list[str]:
    """The anchors of a page's headings, in order, repeats included."""
    return [github_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", outside_fences(page_text(page)), flags=re.MULTILINE)]


def anchors(page: str) -> set[str]:
    """The anchors of a page's headings, numbered as GitHub numbers repeats."""
    found: set[str] = set()
    for anchor in heading_anchors(page):
        n = 0
        while (anchor if n == 0 else f"{anchor}-{n}") in found:
            n += 1
        found.add(anchor if n == 0 else f"{anchor}-{n}")
    return found


def readme_anchors() -> set[str]:
    return anchors("README.md")


def link_targets(page: str) -> list[str]:
    """The targets of a page's links, outside code."""
    prose = re.sub(r"`[^`\n]+`", "", outside_fences(page_text(page)))
    return re.findall(r"\]\(([^)\s]+)\)", prose)


def link_problem(page: str, target: str) -> str | None:
    """What is wrong with a link of ``page`` to ``target``, or None."""
    if re.match(r"[a-z]+:", target):
        return None  # https://..., mailto:...
    path, _, anchor = target.partition("#")
    resolved = (ROOT / page).parent / path if path else ROOT / page
    resolved = resolved.resolve()
    if not resolved.is_file():
        return f"{page}: {target} leads to no file"
    name = str(resolved.relative_to(ROOT))
    image = resolved.suffix in (".png", ".svg", ".jpg") and name.startswith("docs/")  # a picture of the site
    if page.startswith("docs/") and (not name.startswith("docs/") or resolved.suffix != ".md") and not image:
        return f"{page}: {target} leads out of docs/ (not a page of the site)"
    if anchor and (resolved.suffix != ".md" or anchor not in anchors(name)):
        return f"{page}: {target}: {name} has no heading #{anchor}"
    return None


def test_every_link_leads_to_a_page_and_a_heading() -> None:
    problems, seen = [], 0
    for page in pages():
        for target in link_targets(page):
            seen += 1
            problem = link_problem(page, target)
            if problem:
                problems.append(problem)
    assert problems == [], "\n".join(problems)
    assert seen > 120
    assert github_anchor("Following a run: `run`, `watch` and `--jsonl`") == "following-a-run-run-watch-and---jsonl"


def test_the_link_check_catches_a_wrong_link() -> None:
    assert link_problem("docs/tools.md", "backend.md#the-spec") is None
    assert link_problem("docs/tools.md", "#guardrails") is None
    assert link_problem("README.md", "docs/tools.md#guardrails") is None
    assert "no heading" in (link_problem("docs/tools.md", "backend.md#the-spex") or "")
    assert "no file" in (link_problem("docs/tools.md", "backends.md") or "")
    assert "out of docs" in (link_problem("docs/tools.md", "../README.md") or "")


#: The folders of the repository whose paths the pages name.
REPO_FOLDERS = ("agentloop", "workflows", "activities", "workers", "tests", "benchmarks", "deploy", "docs")
#: A repository path in a code span or a link: a file with a suffix, or a folder ending in ``/``.
REPO_PATH = re.compile(
    r"(?<![\w./$-])(?:\.\./)*((?:" + "|".join(REPO_FOLDERS) + r")/[\w./-]*)(?![\w*<{])"
)
FILE_SUFFIXES = {".py", ".md", ".js", ".css", ".html", ".svg", ".toml", ".yml", ".yaml", ".json", ".jsonl",
                 ".sh", ".txt", ".cfg", ".ini", ".conf", ".service", ".env"}


def pages_naming_paths() -> list[str]:
    """Every Markdown page of the repository: README.md, docs/, and the
    README.md files of the folders (tests/, benchmarks/, ...)."""
    found = {*pages(), *(str(p.relative_to(ROOT)) for folder in REPO_FOLDERS for p in (ROOT / folder).rglob("*.md"))}
    return sorted(p for p in found if "node_modules" not in p)


def named_paths(text: str) -> list[str]:
    """The repository paths a page's code spans and links name (``tests/x.py::test`` and
    ``agentloop/cli/runs/run.py:cmd_run`` name the file); globs and placeholders are not paths."""
    spans = re.findall(r"`([^`\n]+)`", text) + re.findall(r"\]\(([^)\s]+)\)", text)
    found = []
    for span in spans:
        for match in REPO_PATH.finditer(span):
            path = match.group(1).rstrip(".").split("::")[0].split("#")[0]
            if path.endswith("/") or Path(path).suffix in FILE_SUFFIXES:
                found.append(path)
    return found


#: Folders the tests write into (ignored by git): a page may name them before they exist.
WRITTEN_BY_TESTS = ("tests/artifacts/",)


def test_every_repository_path_a_page_names_exists() -> None:
    problems, seen = [], 0
    for page in pages_naming_paths():
        for path in named_paths(page_text(page)):
            seen += 1
            if not (ROOT / path).exists() and not path.startswith(WRITTEN_BY_TESTS):
                problems.append(f"{page} names {path}, which is not in the repository")
    assert problems == [], "\n".join(problems)
    assert seen > 100


def test_the_path_check_catches_a_stale_path() -> None:
    text = ("State in `workflows/state.py`, tests in [cli](../tests/process/cli/test_cli.py), "
            "`tests/*/x.py`, `agentloop/x`.")
    assert named_paths(text) == ["workflows/state.py", "tests/process/cli/test_cli.py"]
    assert named_paths("`pytest tests/unit/test_docs_paths.py::test_one -q` `agentloop/cli/runs/run.py:cmd_run`") == [
        "tests/unit/test_docs_paths.py", "agentloop/cli/runs/run.py"]
    assert not (ROOT / "workflows/state.py").exists() and (ROOT / "tests/process/cli/test_cli.py").exists()


def test_headings_are_unique_within_a_page() -> None:
    # A repeated heading is numbered differently by GitHub (-1) and MkDocs (_1).
    repeated = [f"{page}: #{anchor}" for page in pages()
                for anchor, n in Counter(heading_anchors(page)).items() if n > 1]
    assert repeated == []


def test_spec_files_the_docs_use_are_shown_or_exist() -> None:
    """Every ``--spec FILE`` of a command is a file of the repository or one
    the page shows (a YAML block whose first line is ``# FILE...``), and a
    shown one is a valid AgentSpec."""
    import yaml

    from agentloop.shared.definition.spec import AgentSpec

    problems = []
    for page in pages():
        shown = {}
        for block in fenced_blocks(page_text(page), page):
            first = block.code.splitlines()[0] if block.code.strip() else ""
            if block.lang in ("yaml", "json") and (name := re.match(r"#\s*([\w./-]+\.(?:ya?ml|json))", first)):
                shown[name.group(1)] = block.code
        for where, line in command_lines():
            if not where.startswith(page):
                continue
            for args in commands_in(line, "agentloop"):
                for flag, value in zip(args, args[1:], strict=False):
                    if flag != "--spec" or value.isupper():  # FILE: a synopsis
                        continue
                    if value in shown:
                        AgentSpec.model_validate(yaml.safe_load(shown[value]))
                    elif not (ROOT / value).is_file():
                        problems.append(f"{where}: --spec {value} is neither shown on the page nor in the repository")
    assert problems == []


def test_examples_point_to_pages_that_exist() -> None:
    """The comments of ``examples/`` name pages (``docs/x.md``) that exist,
    and README sections (``README "Heading"``) that the README has."""
    problems = []
    for example in sorted((ROOT / "examples").iterdir()):
        text = example.read_text()
        problems += [f"{example.name}: {page}" for page in re.findall(r"docs/[\w-]+\.md", text)
                     if not (ROOT / page).is_file()]
        problems += [f"{example.name}: README {heading!r}" for heading in re.findall(r'README "([^"]+)"', text)
                     if not re.search(rf"^#+ {re.escape(heading)}\s*$", readme_text(), re.MULTILINE)]
    assert problems == []


def test_shell_variables_are_set_before_they_are_used() -> None:
    """A page's shell blocks use ``$NAME`` only after one of them set it
    (``export NAME=...``), or names the environment already has."""
    given = {"HOME", "PATH", "PWD", "USER", "TEMPORAL_ADDRESS", "AGENTLOOP_HOME"}
    problems = []
    for page in pages():
        defined = set(given)
        for block in fenced_blocks(page_text(page), page):
            if block.lang not in ("bash", "sh", "shell"):
                continue
            for n, line in enumerate(block.code.splitlines()):
                code = line.split(" # ")[0]
                problems += [f"{page}:{block.line + 1 + n}: ${name} is used before it is set"
                             for name in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", code) if name not in defined]
                defined.update(re.findall(r"(?:export\s+)?\b([A-Z_][A-Z0-9_]*)=", code))
    assert problems == []


def test_the_http_api_start_example_asks_for_the_approval_the_page_decides() -> None:
    from agentloop.shared.definition.spec import AgentSpec

    text = page_text("docs/http-api.md")
    body = re.search(r"curl -s -X POST http://127\.0\.0\.1:\d+/v1/runs \\\n.*?-d '(\{.*?\})'\n", text, re.DOTALL)
    assert body, "docs/http-api.md has no start example"
    spec = AgentSpec.model_validate(json.loads(body.group(1))["spec"])
    asking = [rule.tool for rule in spec.permissions if rule.action == "ask"]
    assert asking and set(asking) <= set(spec.tools), spec.permissions


def test_pages_that_run_mkdocs_say_it_needs_the_dev_extra() -> None:
    for page in pages():
        if "mkdocs serve" in page_text(page):
            assert '.[dev]' in page_text(page), page


def test_the_readme_says_what_fills_an_empty_worker() -> None:
    for block in fenced_blocks(readme_text()):
        if "workflows=[], activities=[]" in block.code:
            assert "plugin adds" in block.code, block.code


def test_the_readme_is_a_short_front_page() -> None:
    text = readme_text()
    assert len(text.splitlines()) <= 400
    examples = python_blocks()
    assert len(examples) == 1 and len(examples[0].code.splitlines()) <= 30
    # Every page of docs/ is linked from the front page.
    linked = {target.partition("#")[0] for target in link_targets("README.md")}
    assert sorted(set(pages()[1:]) - linked) == []
    assert "`.venv/bin/pytest tests/unit`" in text


#: The benchmarks run as ``python -m benchmarks.<folder>.<name>``, as ``<folder>.<name>``.
RUNNABLE_BENCHMARKS = sorted(".".join(p.relative_to(ROOT / "benchmarks").with_suffix("").parts)
                             for p in (ROOT / "benchmarks").rglob("*.py") if "__main__" in p.read_text())


def test_the_benchmarks_readme_says_how_to_run_each_benchmark() -> None:
    how_to = (ROOT / "benchmarks" / "README.md").read_text()
    performance = page_text("docs/performance.md")
    assert len(RUNNABLE_BENCHMARKS) > 5
    assert [b for b in RUNNABLE_BENCHMARKS if f"python -m benchmarks.{b}" not in how_to] == []
    named = {name.rstrip(".") for name in re.findall(r"python -m benchmarks\.([\w.]+)", how_to + performance)}
    assert sorted(named - set(RUNNABLE_BENCHMARKS)) == []
    # The figures are in docs/performance.md, not in the how-to.
    links = link_targets("benchmarks/README.md")
    assert "../docs/performance.md" in links
    assert [p for t in links if (p := link_problem("benchmarks/README.md", t))] == []


def test_each_benchmark_figure_has_its_date_machine_and_command() -> None:
    """docs/performance.md: every section with a table of figures says when,
    on what machine, and with which command they were measured."""
    sections = re.split(r"^## ", outside_fences(page_text("docs/performance.md")), flags=re.MULTILINE)[1:]
    figure = re.compile(r"\s*\d[\d.,]*\s*(x|ms|KiB|KB|MB)?\s*")
    measured = [s for s in sections
                if any(figure.fullmatch(cell) for row in re.findall(r"^\|(.*)\|$", s, flags=re.MULTILINE)
                       for cell in row.split("|"))]
    assert len(measured) >= 5
    problems = []
    for section in measured:
        title = section.splitlines()[0]
        if not re.search(r"\b20\d\d-\d\d-\d\d\b", section):
            problems.append(f"{title}: no date")
        if "2 cores, 24 GiB" not in section:
            problems.append(f"{title}: no machine")
        if not re.search(r"`[^`]*python -m benchmarks\.\w+[^`]*`", section):
            problems.append(f"{title}: no command")
    assert problems == [], "\n".join(problems)


def test_the_python_requirement_is_pyprojects() -> None:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    version = re.fullmatch(r">=\s*(3\.\d+)", requires).group(1)
    assert re.findall(r"Python (3\.\d+) or newer", readme_text()) == [version], requires
    stated = {v for page in pages() for v in re.findall(r"Python (3\.\d+) or newer", page_text(page))}
    assert stated == {version}, (stated, requires)
    assert sys.version_info >= tuple(int(p) for p in version.split("."))


def test_the_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    blocks = fenced_blocks(readme_text())
    first_screen = next(b.code.strip() for b in blocks if b.lang == "bash" and b.code.strip().endswith("pytest"))
    assert first_screen == ci
    assert ci.endswith("&& .venv/bin/pytest")
    development = page_text("docs/development.md")
    first_block = fenced_blocks(development, "docs/development.md")[0]
    assert (first_block.lang, first_block.code) == ("bash", ".venv/bin/pytest\n"), first_block
    assert "tests/test_docs.py" in development and "tests/test_docs_site.py" in development


def test_the_docs_speak_of_the_product() -> None:
    # Not of the design documents they were built from, nor of the days the figures were taken.
    for page in pages():
        text = page_text(page)
        assert re.findall(r"(?i)\bseed \d+", text) == [], page
        lab_notebook = r"(?i)\b(on a (?:slow|slower|quiet|quieter|noisy) (?:day|hour)|twenty-\w+ run)"
        assert re.findall(lab_notebook, text) == [], page
