"""The web console at ``/``: the runs list, a run's page (its conversation
live, usage and cost, sub-agents, approvals) and a thread's page (the same,
and a box to send the next message).

No build step: each page is a small server-rendered shell, and
``static/console.js`` and the modules it imports (plain JavaScript as
native ES modules, no bundler, no CDN) fill it from
the JSON API and the run's Server-Sent Events, as any other client would.
So the console needs the same token as the API: when tokens are configured,
it asks for one and keeps it in the browser's ``localStorage``; the event
stream gets it as ``?access_token=`` (an ``EventSource`` cannot set headers).
The shells hold no data of any run, so they need no token themselves.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Awaitable, Callable
from functools import cache
from importlib import resources
from string import Template
from typing import NamedTuple
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from agentloop.server.deps import server_state
from agentloop.server.problems import Problem
from agentloop.shared.runs.quotas import QUOTA_WORKFLOW_PREFIX

router = APIRouter(include_in_schema=False)

#: The console's script: native ES modules (``static/*.js``), ``console.js``
#: the page's entry; it imports the others by relative URL (``./dom.js``).
SCRIPTS = (
    "console.js", "dom.js", "format.js", "api.js", "runs.js", "run-page.js", "run-events.js",
    "run-conversation.js", "run-waiting.js", "run-side.js", "composer.js", "evals.js", "diff.js",
    "quotas.js",
)

#: The files under ``/assets/``, with their media types.
ASSETS = {
    **{name: "text/javascript; charset=utf-8" for name in SCRIPTS},
    "console.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}

#: The pages run only the console's own script and style (no inline script,
#: nothing from another origin) and are never framed.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _asset(name: str) -> tuple[bytes, str]:
    """An asset's bytes and its ETag (a hash of the bytes)."""
    data = resources.files("agentloop.server").joinpath("static", name).read_bytes()
    return data, hashlib.sha256(data).hexdigest()[:16]


@cache
def _shell() -> Template:
    return Template(resources.files("agentloop.server").joinpath("static", "page.html").read_text("utf-8"))


def temporal_ui_link(base: str | None, namespace: str, run_id: str) -> str:
    """The run's page in the Temporal UI, or "" when the UI's address is unknown."""
    if not base:
        return ""
    return f"{base.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows/{quote(run_id, safe='')}"


def _page(request: Request, page: str, title: str, ident: str = "", workflow_id: str = "") -> HTMLResponse:
    state = server_state(request)
    namespace = state.client.temporal.namespace
    attrs = {
        "page": page,
        "id": ident,
        "auth": "1" if state.settings.tokens else "0",
        "namespace": namespace,
        "temporal-ui": temporal_ui_link(state.settings.temporal_ui, namespace, workflow_id or ident) if ident else "",
        "temporal-ui-base": (state.settings.temporal_ui or "").rstrip("/"),
        "default-workspace": state.settings.default_workspace or "",
    }
    body = " ".join(f'data-{key}="{html.escape(value, quote=True)}"' for key, value in attrs.items())
    text = _shell().substitute(
        title=html.escape(title), body_attrs=body,
        css=f"/assets/console.css?v={_asset('console.css')[1]}",
        js=f"/assets/console.js?v={_asset('console.js')[1]}",
        icon=f"/assets/favicon.svg?v={_asset('favicon.svg')[1]}",
    )
    return HTMLResponse(text, headers=PAGE_HEADERS)


class ConsolePage(NamedTuple):
    """A page of the console: a shell that ``static/console.js`` fills."""

    path: str  #: the route; its one path parameter, if any, is the page's id
    page: str  #: what the script shows (the shell's ``data-page``)
    title: str  #: the window's title; ``{}`` stands for the id
    workflow_prefix: str = ""  #: before the id, the workflow the Temporal UI link names


#: The console's pages, each served by :func:`_page`.
PAGES = (
    ConsolePage("/", "runs", "Runs"),  # the runs list (``?filter=waiting``: the runs waiting on someone)
    ConsolePage("/runs/{run_id}", "run", "Run {}"),  # its conversation live, approvals, usage, cost, sub-agents
    ConsolePage("/threads/{thread_id}", "thread", "Thread {}"),  # the same, and a box for the next message
    ConsolePage("/evals", "evals", "Evals"),
    ConsolePage("/evals/{eval_id}", "eval", "Eval {}"),  # its cases, pass or fail and why, both runs, their diff
    ConsolePage("/diff", "diff", "Compare runs"),  # two runs side by side (``?a=RUN&b=RUN``; docs/diff.md)
    ConsolePage("/quotas/{tenant}", "quota", "Quota of {}", QUOTA_WORKFLOW_PREFIX),  # limits, spent, reserved
)


def _page_route(page: ConsolePage) -> Callable[[Request], Awaitable[HTMLResponse]]:
    async def serve(request: Request) -> HTMLResponse:
        ident = next(iter(request.path_params.values()), "")
        title = f"{page.title.format(ident)} · agentloop"
        return _page(request, page.page, title, ident, page.workflow_prefix + ident if ident else "")

    return serve


for _console_page in PAGES:
    router.add_api_route(_console_page.path, _page_route(_console_page), methods=["GET"],
                         response_class=HTMLResponse, name=f"{_console_page.page}_page")


@router.get("/assets/{name}")
async def asset(name: str, request: Request) -> Response:
    """The console's script, style sheet and icon."""
    if name not in ASSETS:
        raise Problem(404, "Not found", f"the console has no asset {name[:80]!r}; it serves "
                      f"{', '.join(sorted(ASSETS))}")
    data, etag = _asset(name)
    headers = {"ETag": f'"{etag}"', "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    if request.headers.get("if-none-match") == f'"{etag}"':
        return Response(status_code=304, headers=headers)
    return Response(data, media_type=ASSETS[name], headers=headers)
