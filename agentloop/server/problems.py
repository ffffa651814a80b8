"""Every error the API returns is ``application/problem+json`` (RFC 9457):
``{type, title, status, detail, ...}``, where ``detail`` is the sentence
that says what was wrong and what to do."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentloop.shared.base.errors import DecisionRejected, UserError

PROBLEM_JSON = "application/problem+json"


class FieldError(BaseModel):
    """One reason a request was not valid (422)."""

    field: str = Field(description="the field, dotted (e.g. `spec.model`), or `body`")
    reason: str


class ProblemDetails(BaseModel):
    """An error answer (RFC 9457), served as ``application/problem+json``."""

    model_config = ConfigDict(extra="allow")

    type: str = "about:blank"
    title: str
    status: int
    detail: str = Field(description="what was wrong and what to do")
    instance: str | None = Field(default=None, description="the request's path")
    errors: list[FieldError] | None = Field(default=None, description="422: a reason per field")
    waiting: list[str] | None = Field(default=None, description="409 on a call id: the call ids the run waits for")


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses: each a problem document."""
    described = {400: "Bad request", 401: "No valid token", 403: "The token's scope is too small",
                 404: "No such run or agent", 409: "The run refused the request", 422: "A field is not valid",
                 503: "No worker answers for the run"}
    problem = {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}
    return {status: {"model": ProblemDetails, "description": described.get(status, "Error"),
                     "content": {PROBLEM_JSON: problem}} for status in statuses}


class Problem(Exception):
    """An error answer: its HTTP status, a short title, the sentence, and
    any extra members (e.g. ``waiting``: the call ids a run waits for)."""

    def __init__(self, status: int, title: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.extra = status, title, detail, extra

    def body(self, instance: str | None = None) -> dict[str, Any]:
        body = {"type": "about:blank", "title": self.title, "status": self.status, "detail": self.detail}
        if instance:
            body["instance"] = instance
        return {**body, **self.extra}


def problem_response(problem: Problem, request: Request | None = None) -> JSONResponse:
    headers = problem.extra.pop("headers", None)  # response headers (Retry-After), not members of the body
    return JSONResponse(problem.body(request.url.path if request else None), status_code=problem.status,
                        media_type=PROBLEM_JSON, headers=headers)


#: The names pydantic gives a union's members and a model's validators in an
#: error's location (``function-after[_check_thinking(), ...]``, ``str``):
#: not fields the caller wrote.
_VALIDATOR_TAG = re.compile(r"^[a-z-]+\[.*\]$", re.DOTALL)
_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _field(loc: tuple[Any, ...]) -> str:
    """The field as the caller wrote it, dotted: ``spec.tool``, ``spec.permissions.0.action``."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")
             and not (isinstance(p, str) and (_VALIDATOR_TAG.match(p) or p in _TYPE_TAGS))]
    return ".".join(parts) or "body"


def _other_branch(error: dict[str, Any], errors: list[dict[str, Any]]) -> bool:
    """An error of a union's plain member (``spec`` as a ``str``, the name of
    a registered agent) when another member (the object given) has errors of
    its own: the caller meant that one."""
    loc = tuple(error.get("loc", ()))
    for i, part in enumerate(loc):
        if part in _TYPE_TAGS and any(
            tuple(other.get("loc", ()))[:i] == loc[:i] and tuple(other.get("loc", ()))[i:i + 1] != (part,)
            for other in errors if other is not error
        ):
            return True
    return False


def validation_problem(err: RequestValidationError) -> Problem:
    """422: one reason per field, e.g. ``input: Field required``, fields
    named as the caller wrote them."""
    raw = list(err.errors())
    errors: list[dict[str, str]] = []
    for e in raw:
        entry = {"field": _field(tuple(e.get("loc", ()))), "reason": e.get("msg", "invalid")}
        if not _other_branch(e, raw) and entry not in errors:
            errors.append(entry)
    listing = "; ".join(f"{e['field']}: {e['reason']}" for e in errors[:10])
    return Problem(422, "Invalid request", f"the request is not valid: {listing}", errors=errors)


def install(app: FastAPI) -> None:
    """Answer every error as a problem document."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem_response(validation_problem(exc), request)

    @app.exception_handler(DecisionRejected)
    async def _rejected(request: Request, exc: DecisionRejected) -> JSONResponse:
        return problem_response(Problem(409, "Request refused by the run", str(exc)), request)

    @app.exception_handler(UserError)
    async def _user(request: Request, exc: UserError) -> JSONResponse:
        status = 404 if str(exc).startswith("no run ") else 400
        return problem_response(Problem(status, "Not found" if status == 404 else "Bad request", str(exc)), request)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no such endpoint: {request.method} {request.url.path} (the API is described at /v1/openapi.json)"
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path} (see /v1/openapi.json)"
        return problem_response(Problem(exc.status_code, "Error", detail), request)
