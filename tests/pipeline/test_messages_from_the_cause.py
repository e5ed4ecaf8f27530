"""Every message names the real cause, found by its own check (issue 42, items 8 and 10).

A TLS handshake that fails is said as TLS, never as a folder that cannot be written (an SSL
error's `errno` is the TLS library's code, 1, which is also EPERM's number); a host DNS does not
know is said as such, at the first attempt, never after 9 retries.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from esper_warehouse.pipelines import cli
from esper_warehouse.pipelines.exit_codes import Exit

from tests.conftest import ENTERPRISE_ID
from tests.source.test_inputs import plain_port  # noqa: F401 (a fixture)

KEY = "sk-test-messages-0123456789abcdef"


def _tenant(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", base_url)
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", KEY)
    monkeypatch.setenv("SOURCES__ESPER__ENTERPRISE_ID", ENTERPRISE_ID)


def _tenants_file(folder: Path, base_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two tenants at the same base URL (each its own key variable)."""
    monkeypatch.setenv("KEY_ONE", KEY)
    monkeypatch.setenv("KEY_TWO", KEY)
    path = folder / "tenants.toml"
    path.write_text(
        'warehouse_dir = "warehouses"\n'
        + "".join(
            f'[tenants.{name}]\nbase_url = "{base_url}"\nenterprise_id = "{ENTERPRISE_ID}"\n'
            f'api_key_env = "KEY_{name.upper()}"\n'
            for name in ("one", "two")
        )
    )
    return path


def _run(how: str, folder: Path, base_url: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The words of `run` on one tenant (`single`) or on every tenant of a tenants file."""
    if how == "single":
        _tenant(monkeypatch, base_url)
        return ["run", "--warehouse", str(folder / "esper_warehouse.duckdb"), "--no-models"]
    path = _tenants_file(folder, base_url, monkeypatch)
    return ["run", "--all-tenants", "--tenants-file", str(path), "--no-models"]


@pytest.mark.parametrize("how", ["single", "tenants"])
def test_https_to_a_plain_http_port_is_said_as_tls_not_as_a_folder(
    how: str,
    plain_port: tuple[int, list[int]],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port, accepted = plain_port
    argv = _run(how, tmp_path, f"https://127.0.0.1:{port}/api", monkeypatch)

    code = cli.main(argv)
    out = capsys.readouterr()

    assert code == Exit.CONFIG, out.err
    said = out.out + out.err
    assert "failed (WRONG_VERSION_NUMBER): the server there does not speak TLS" in said
    assert "cannot be written" not in said and "need a folder" not in said
    assert len(accepted) == (1 if how == "single" else 2), "one attempt per tenant"


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The system resolver's answer for hosts under `.example.invalid` (`errno`: set by the
    test), the lookups counted; every other name is resolved as usual."""
    real = socket.getaddrinfo
    state: dict[str, Any] = {"errno": socket.EAI_NONAME, "asked": 0}

    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith(".example.invalid"):
            state["asked"] += 1
            words = {socket.EAI_NONAME: "Name or service not known"}
            raise socket.gaierror(
                state["errno"], words.get(state["errno"], "Temporary failure in name resolution")
            )
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    yield state


@pytest.mark.parametrize("how", ["single", "tenants"])
@pytest.mark.parametrize(
    ("errno", "code", "says"),
    [
        (socket.EAI_NONAME, Exit.CONFIG, "{host} is not known to DNS (name lookup: Name or"),
        (socket.EAI_AGAIN, Exit.API, "lookup of {host} failed (Temporary failure in name"),
    ],
    ids=["no such name", "resolver down"],
)
def test_a_name_lookup_failure_is_one_attempt_that_says_so(
    how: str,
    errno: int,
    code: int,
    says: str,
    resolver: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A tenant on a host that does not resolve: one lookup per tenant (the resolver has retried
    already), its message, in seconds; measured before: 9 retries, 1 min 50 s per tenant."""
    resolver["errno"] = errno
    argv = _run(how, tmp_path, "https://acme-api.example.invalid/api", monkeypatch)

    started = time.monotonic()
    exit_code = cli.main(argv)
    seconds = time.monotonic() - started
    out = capsys.readouterr()

    assert exit_code == code, out.err
    assert says.format(host="https://acme-api.example.invalid") in out.out + out.err
    assert resolver["asked"] == (1 if how == "single" else 2), "one lookup per tenant"
    assert seconds < 15
