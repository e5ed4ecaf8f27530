"""No piece of the API key reaches a person or the warehouse (issue 32, item 6), end to end.

A stand-in server on loopback quotes the key in every answer, placed so that the client's cut
splits it with the most of it kept (39 of 40 characters before the cut). `run` prints and logs
its error and records it in `esper._esper_runs`; `doctor` prints its report and logs its retries.
Nothing of the key, 8 characters or more, may be in any of them. Every cut position is covered at
the client (`tests/source/test_redaction.py`); here, what the commands do with those texts.
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb
import httpx
import orjson
import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.runner import run
from esper_warehouse.sources.esper.http import EsperClient

from tests.conftest import API_KEY, ENTERPRISE_ID
from tests.pipeline.helpers import settings, with_body
from tests.source.test_client import Reply
from tests.source.test_redaction import CUT, KEY, key_fragments, quoting

WORST = {kind: cut - (len(KEY) - 1) for kind, cut in CUT.items()}  # 39 characters before the cut
ANSWERS = {"message": 503, "body": 200}  # a retried error quoting it; a body that is not JSON


def answer(kind: str) -> Reply:
    """Every answer of the stand-in server: the key where the client cuts, or as a field name
    of a list answer the loader cannot read (named in the error, never cut)."""
    if kind == "field name":
        return Reply(200, {"content": {KEY: 1, "note": "x" * 20}})
    return quoting(kind, WORST[kind], ANSWERS[kind])


def _environment(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", url + "/api")
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", KEY)
    monkeypatch.setenv("SOURCES__ESPER__ENTERPRISE_ID", ENTERPRISE_ID)
    monkeypatch.setenv("SOURCES__ESPER__MAX_RETRIES", "1")  # one retry: one warning, one error


def _warehouse_text(warehouse: Path) -> str:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute("select * from esper._esper_runs").fetchall()
    assert rows, "the failed run is recorded"
    return json.dumps([[str(v) for v in row] for row in rows])


@pytest.mark.parametrize("kind", [*sorted(ANSWERS), "field name"])
def test_run_and_doctor_quote_the_server_without_the_key(
    serve: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    from esper_warehouse.pipelines import cli
    from esper_warehouse.pipelines.views.doctor import probes

    monkeypatch.setattr(probes, "BACKOFF_MAX_S", 0.01)  # its retries, not its waits, matter here
    server = serve(lambda seen: answer(kind))
    _environment(monkeypatch, server.url)
    warehouse = tmp_path / "warehouse.duckdb"
    duckdb.connect(str(warehouse)).close()  # there before: the failed run is recorded in it
    report = tmp_path / "doctor.json"

    code = cli.main(["run", "--warehouse", str(warehouse), "--no-models", "--lock-timeout", "5"])
    run_out = capsys.readouterr()
    doctor_code = cli.main(["doctor", "--json", str(report)])
    doctor_out = capsys.readouterr()

    assert code == 3, run_out.err
    quoted = "keys: ['[redacted]', 'note']" if kind == "field name" else "x" * 20
    assert quoted in run_out.err, "the server's text is quoted, the key taken out"
    assert doctor_code != 0
    texts = {
        "run stdout": run_out.out,
        "run stderr": run_out.err,
        "esper._esper_runs": _warehouse_text(warehouse),
        "doctor stdout": doctor_out.out,
        "doctor stderr": doctor_out.err,
        "doctor.json": report.read_text() if report.exists() else "",
        **files_left(tmp_path),
    }
    leaks = {where: key_fragments(text) for where, text in texts.items() if key_fragments(text)}
    assert sorted(leaks) == [], leaks


def files_left(folder: Path) -> dict[str, str]:
    """Every file under `folder` (the warehouse, dlt's working folder beside it: its trace,
    state, schemas and packages, any log), as text: what a run leaves on disk."""
    return {
        str(path.relative_to(folder)): path.read_bytes().decode("latin-1")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _fragments_in_any_case(text: str, key: str) -> list[str]:
    """`key_fragments` of `key` in `text`, whatever the case of either."""
    return key_fragments(text.lower(), key.lower())


def _warehouse_dump(warehouse: Path) -> str:
    """Every value of every table of the warehouse, as text."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        tables = con.execute(
            "select table_schema, table_name from information_schema.tables"
        ).fetchall()
        rows = [
            con.execute(f'select * from "{schema}"."{name}"').fetchall() for schema, name in tables
        ]
    return json.dumps(rows, default=str)


@pytest.mark.parametrize("nightly", [False, True], ids=["first load", "nightly"])
def test_a_key_the_server_echoes_into_fields_is_cut_from_every_text_and_the_warehouse(
    sim: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    nightly: bool,
) -> None:
    """A server echoing the request's `Authorization` header into a typed field (`last_seen`,
    read as NULL, quoted in the unreadable-value warning) and, upper-cased, into a text field
    (`alias`, loaded): the warning quotes it cut short with the key taken out, and no piece of
    the key, in any case, is in stdout, stderr, the run record or any table."""
    from esper_warehouse.pipelines import cli

    from tests.conftest import API_KEY

    warehouse = tmp_path / "warehouse.duckdb"
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", sim.base_url)
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", API_KEY)
    monkeypatch.setenv("SOURCES__ESPER__ENTERPRISE_ID", ENTERPRISE_ID)
    argv = ["run", "--warehouse", str(warehouse), "--resources", "devices", "--no-models"]
    if nightly:
        assert cli.main(argv) == 0
        sim.advance(hours=2)
        argv.append("--full")  # every device read again, through the echoing server
    capsys.readouterr()
    header = f"Bearer {API_KEY}"
    echo = {"kind": "drift", "variant": "value", "route": "/v2/devices/"}
    sim.set_faults(
        [
            {**echo, "field": "last_seen", "value": header},
            {**echo, "field": "alias", "value": header.upper()},
        ]
    )

    code = cli.main(argv)
    out = capsys.readouterr()

    assert code == 0, out.err
    assert "devices.last_seen: 'Bearer [redacted]' cannot be read as timestamp" in out.err
    texts = {"stdout": out.out, "stderr": out.err, "warehouse": _warehouse_dump(warehouse)}
    texts |= files_left(tmp_path)
    leaks = {where: _fragments_in_any_case(t, API_KEY) for where, t in texts.items()}
    assert {where: found for where, found in leaks.items() if found} == {}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        aliases = {a for (a,) in con.execute("select alias from esper.devices").fetchall()}
    assert aliases == {"BEARER [redacted]"}, "the text is loaded, the key taken out"


def test_a_long_value_in_an_unreadable_value_warning_is_cut_after_the_key_is_taken_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A value quoted in a warning is cut short; a key straddling the cut loses no piece to it."""
    from esper_warehouse.sources.esper.arrow import SHOWN_CHARS, Unreadable, cols, to_arrow
    from esper_warehouse.sources.esper.http.errors import keep_secret

    keep_secret(KEY)

    class Table:
        name = "devices"
        columns = cols("last_seen", "timestamp")
        keep_extra = False
        extra = MappingProxyType({})
        identifying: frozenset[str] = frozenset()

    quoted = []
    for start in range(SHOWN_CHARS - len(KEY), SHOWN_CHARS):
        value = "x" * start + KEY.swapcase() + "y" * 200
        tally = Unreadable()
        with caplog.at_level("WARNING"):
            caplog.clear()
            to_arrow([{"last_seen": value}], Table(), unreadable=tally)
        quoted.append(caplog.text)
    assert all("cannot be read as timestamp" in t for t in quoted)
    assert [t for t in quoted if _fragments_in_any_case(t, KEY)] == []
    assert all("y" * 100 not in t for t in quoted), "the value is cut short"


def test_a_redirect_to_a_host_named_by_the_key_is_said_without_it(
    serve: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 302 to `http://<key>.example.invalid/`: the error names the redirect's host lower-cased;
    the key is taken out whatever its case, in stdout, stderr and the run record (a warehouse
    that exists already: a nightly run records its failure there)."""
    key = KEY.replace("_", "-")  # a host name's characters
    server = serve(lambda seen: Reply(302, {}, {"Location": f"http://{key}.example.invalid/x"}))
    _environment(monkeypatch, server.url)
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", key)
    warehouse = tmp_path / "warehouse.duckdb"
    duckdb.connect(str(warehouse)).close()

    code = cli_main(["run", "--warehouse", str(warehouse), "--no-models", "--lock-timeout", "5"])
    out = capsys.readouterr()

    assert code == 3, out.err
    assert "answered an unexpected redirect (HTTP 302) to http://[redacted].example.invalid" in (
        out.err
    )
    texts = {"stdout": out.out, "stderr": out.err, "esper._esper_runs": _warehouse_text(warehouse)}
    leaks = {where: _fragments_in_any_case(t, key) for where, t in texts.items()}
    assert {where: found for where, found in leaks.items() if found} == {}


def cli_main(argv: list[str]) -> int:
    from esper_warehouse.pipelines import cli

    return cli.main(argv)


class EchoKeyIntoCursor(httpx.HTTPTransport):
    """Loopback transport: the device list's cursors carry the key (the server takes them
    back), and the list refuses its third page, quoting the cursor it was sent. `wrapped`: the
    cursor is an opaque token, base64 of the key and the real cursor, as a server's may be."""

    def __init__(self, wrapped: bool = False) -> None:
        super().__init__()
        self.pages = 0
        self.wrapped = wrapped

    def wrap(self, cursor: str) -> str:
        if self.wrapped:
            return base64.urlsafe_b64encode(f"{API_KEY}|{cursor}".encode()).decode()
        return API_KEY + cursor

    def unwrap(self, cursor: str) -> str:
        token = base64.urlsafe_b64encode(f"{API_KEY}|".encode()).decode()[:40]
        if self.wrapped and cursor.startswith(token):  # the client's own first cursor is not
            return base64.urlsafe_b64decode(cursor).decode().split("|", 1)[1]
        return cursor.removeprefix(API_KEY)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/v2/devices/"):
            return super().handle_request(request)
        cursor = request.url.params.get("cursor", "")
        request.url = request.url.copy_set_param("cursor", self.unwrap(cursor))
        self.pages += 1
        response = super().handle_request(request)
        if self.pages > 2:
            return with_body(response.__class__(400, headers=response.headers), {
                "errors": [f"invalid cursor {cursor!r}"]})  # fmt: skip
        response.read()
        body = orjson.loads(response.content)
        envelope = body.get("content", body)
        if envelope.get("next_cursor"):
            envelope["next_cursor"] = self.wrap(envelope["next_cursor"])
        return with_body(response, body)


def _strings(value: Any) -> Iterator[str]:
    """Every text in an unpickled object: its fields, items, an exception's args and chain."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen or item is None:
            continue
        seen.add(id(item))
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | set | frozenset):
            stack += list(item)
        else:
            if isinstance(item, BaseException):
                stack += [*item.args, item.__cause__, item.__context__, str(item)]
            stack += list(getattr(item, "__dict__", {}).values())


@pytest.mark.parametrize("wrapped", [False, True], ids=["as sent", "in base64"])
def test_a_key_echoed_into_a_cursor_reaches_no_file(
    sim: Any, tmp_path: Path, wrapped: bool
) -> None:
    """The device list's cursors carry the key: the run sends them back (they are the server's),
    commits a part, then fails on a refusal quoting the cursor; no file it leaves (the warehouse,
    dlt's trace, state, schemas and packages beside it) holds a piece of the key, as sent or in
    base64, nor does any text of dlt's trace unpickled (its steps' exceptions and their chains)."""
    warehouse = tmp_path / "warehouse.duckdb"
    transport = EchoKeyIntoCursor(wrapped)
    client = EsperClient(sim.base_url, API_KEY, ENTERPRISE_ID, transport=transport)
    with client:
        # in parts of 40 devices, 20 a page: a part commits with the walk's cursor in its state
        options = {"commit_every_devices": 40, "page_size": 20}
        result = run(settings(sim, warehouse, source_options=options), client=client)
    assert result.exit_code == Exit.API, result.error
    assert "invalid cursor '[redacted]" in (result.error or "")
    (trace,) = tmp_path.rglob("trace.pickle")
    texts = {"error": result.error or "", **files_left(tmp_path)}
    texts["trace unpickled"] = "\n".join(_strings(pickle.loads(trace.read_bytes())))
    wrapped_key = transport.wrap("")[:40]  # the key's own characters of the token
    leaks = {
        where: [*_fragments_in_any_case(t, API_KEY), *key_fragments(t, wrapped_key)]
        for where, t in texts.items()
    }
    assert {where: found for where, found in leaks.items() if found} == {}
