"""The client's transport (`http/transport.py`): httpx's public extension points only.

The total deadline of an attempt needs httpcore's socket backend, which httpx's own transport does
not take: the client brings its own httpx transport over an httpcore pool built with the public
`network_backend` parameter. These tests hold what that costs to keep: httpcore's errors reach the
policy as the httpx errors it reads, and nothing in `http/` reaches into another object's private
attributes (an httpx upgrade then cannot break the client silently). The deadline itself is
tested through the client (tests/source/test_client_limits.py, a trickling answer).
"""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import httpcore
import httpx
import pytest
from esper_warehouse.sources.esper.http.transport import (
    HTTPX_ERRORS,
    Guard,
    GuardedTransport,
    as_httpx_errors,
)

HTTP = Path(__file__).resolve().parents[2] / "sources" / "esper" / "http"


def _httpcore_errors() -> list[type[Exception]]:
    """Every exception httpcore exports, but the one its pool keeps to itself (it tries
    another connection)."""
    found = [getattr(httpcore, name) for name in httpcore.__all__]
    return [
        error
        for error in found
        if isinstance(error, type)
        and issubclass(error, Exception)
        and error is not httpcore.ConnectionNotAvailable
    ]


@pytest.mark.parametrize("error", _httpcore_errors(), ids=lambda e: e.__name__)
def test_every_httpcore_error_is_raised_as_the_httpx_error_of_its_name(
    error: type[Exception],
) -> None:
    # A new httpcore error unknown to `HTTPX_ERRORS` would reach the policy as an error that is
    # not the network's, and end the run instead of being retried.
    assert error in HTTPX_ERRORS
    with pytest.raises(httpx.TransportError) as caught, as_httpx_errors():
        raise error("said by httpcore")
    assert type(caught.value) is getattr(httpx, error.__name__)
    assert str(caught.value) == "said by httpcore"
    assert type(caught.value.__cause__) is error  # the chain the TLS and DNS checks read


def test_an_error_that_is_not_httpcore_s_passes_unchanged() -> None:
    with pytest.raises(ValueError, match="not the network"), as_httpx_errors():
        raise ValueError("not the network")


def test_a_refused_connection_is_an_httpx_connect_error() -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    limits = httpx.Limits(max_connections=1)
    transport = GuardedTransport(Guard(), httpx.create_ssl_context(), limits)
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.ConnectError):
        client.get(f"http://127.0.0.1:{port}/api/v2/devices/")


def test_a_stopped_guard_ends_a_request_before_it_connects() -> None:
    guard = Guard()
    guard.stopped = True
    limits = httpx.Limits(max_connections=1)
    transport = GuardedTransport(guard, httpx.create_ssl_context(), limits)
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.ReadError) as caught:
        client.get("http://127.0.0.1:9/api/v2/devices/")
    assert "the client was stopped" in str(caught.value)


def _private_reaches(tree: ast.AST) -> list[str]:
    """`x._name` (x not `self` or `cls`) and `getattr(x, "_name")`-like calls in a module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(ast.unparse(node))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(ast.unparse(node))
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_the_http_package_reaches_into_no_private_attribute() -> None:
    found = {
        path.name: reaches
        for path in sorted(HTTP.glob("*.py"))
        if (reaches := _private_reaches(ast.parse(path.read_text())))
    }
    assert found == {}


def test_the_check_finds_a_patched_private_attribute() -> None:
    patched = "pool = transport._pool\nif hasattr(pool, '_network_backend'):\n    pass\n"
    assert _private_reaches(ast.parse(patched)) == [
        "transport._pool",
        "hasattr(pool, '_network_backend')",
    ]
    assert _private_reaches(ast.parse("self._pool.close()\ngetattr(x, 'http', None)\n")) == []
