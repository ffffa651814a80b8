"""The HTTP doors' decisions (agentloop/server/access/doors.py), pure: which Host,
Origin, content type and size each server accepts."""

from __future__ import annotations

from agentloop.server.access.doors import doors_for, refusal, split_host


def local(**kw):
    return doors_for(tokens=False, allowed_hosts=kw.pop("hosts", []), cors_origins=kw.pop("origins", []),
                     port=8110, **kw)


def test_hosts_are_loopback_with_the_port_or_named() -> None:
    doors = local(hosts=["agents.example.com"])
    for host in ("127.0.0.1:8110", "localhost:8110", "[::1]:8110", "LOCALHOST:8110", "agents.example.com:8110"):
        assert refusal(doors, "GET", {"host": host}) is None, host
    for host in ("evil.example:8110", "127.0.0.1:9999", "127.0.0.1", "localhost.evil.example:8110", "", "x:y"):
        refused = refusal(doors, "GET", {"host": host})
        assert refused is not None and refused.status == 403 and "--allowed-host" in refused.detail, host


def test_with_tokens_any_host_unless_one_is_named() -> None:
    assert refusal(doors_for(tokens=True, allowed_hosts=[], cors_origins=[], port=1), "GET",
                   {"host": "anything:1"}) is None
    named = doors_for(tokens=True, allowed_hosts=["api.example.com"], cors_origins=[], port=443)
    assert refusal(named, "GET", {"host": "api.example.com:443"}) is None
    assert refusal(named, "GET", {"host": "other.example.com:443"}).status == 403


def test_changes_only_from_the_own_origin_or_a_cors_origin() -> None:
    doors = local(origins=["https://console.example.com"])
    post = {"host": "127.0.0.1:8110", "content-type": "application/json"}
    assert refusal(doors, "POST", post) is None  # no Origin: not a browser's cross-site request
    assert refusal(doors, "POST", {**post, "origin": "http://127.0.0.1:8110"}) is None
    assert refusal(doors, "POST", {**post, "origin": "https://console.example.com"}) is None
    assert refusal(doors, "POST", {**post, "origin": "http://localhost:8110"}).status == 403  # not the Host's
    assert refusal(doors, "POST", {**post, "origin": "null"}).status == 403
    assert refusal(doors, "GET", {"host": "127.0.0.1:8110", "origin": "http://evil.example"}) is None


def test_every_post_is_json_and_bodies_are_capped() -> None:
    doors = local(max_body_bytes=10)
    base = {"host": "127.0.0.1:8110"}
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"):
        headers = {**base, **({"content-type": content_type} if content_type else {})}
        assert refusal(doors, "POST", headers).status == 415, content_type
    assert refusal(doors, "POST", {**base, "content-type": "application/json; charset=utf-8"}) is None
    assert refusal(doors, "POST", {**base, "content-type": "application/json", "content-length": "11"}).status == 413
    assert refusal(doors, "POST", {**base, "content-type": "application/json", "content-length": "x"}).status == 400


def test_split_host() -> None:
    assert split_host("[::1]:80") == ("[::1]", 80)
    assert split_host("Example.COM") == ("example.com", None)
    assert split_host("a:b") == ("a", -1)


def test_a_token_may_be_limited_to_some_agents() -> None:
    import pytest

    from agentloop.server.settings import parse_tokens
    from agentloop.shared.base.errors import UserError

    ops, triage = parse_tokens("ops:act:s3cret-s3cret-s3cret:x,triage:act:0123456789abcdef:agents=a|b")
    assert (ops.secret, ops.agents) == ("s3cret-s3cret-s3cret:x", None)
    assert (triage.secret, triage.agents) == ("0123456789abcdef", ("a", "b"))
    with pytest.raises(UserError, match="empty agents= list"):
        parse_tokens("t:act:0123456789abcdef:agents=")


def test_a_token_names_its_tenant_after_or_before_its_agents() -> None:
    import pytest

    from agentloop.server.settings import parse_tokens
    from agentloop.shared.base.errors import UserError

    plain, both, reversed_ = parse_tokens("p:act:0123456789abcdef:x,"
                                          "t:act:s3cret-s3cret-s3cret:agents=a|b:tenant=acme,"
                                          "u:read:zzzzzzzzzzzzzzzzzz:tenant=globex:agents=c")
    assert (plain.secret, plain.tenant, plain.agents) == ("0123456789abcdef:x", None, None)
    assert (both.secret, both.tenant, both.agents) == ("s3cret-s3cret-s3cret", "acme", ("a", "b"))
    assert (reversed_.secret, reversed_.tenant, reversed_.agents) == ("zzzzzzzzzzzzzzzzzz", "globex", ("c",))
    with pytest.raises(UserError, match="tenant='a b': tenant must not contain spaces"):
        parse_tokens("t:act:0123456789abcdef:tenant=a b")
    with pytest.raises(UserError, match="tenant must not be empty"):
        parse_tokens("t:act:0123456789abcdef:tenant=")
