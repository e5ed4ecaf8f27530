"""No piece of the API key reaches a person or the warehouse (issue 32, item 6), end to end.

A stand-in server on loopback quotes the key in every answer, placed so that the client's cut
splits it with the most of it kept (39 of 40 characters before the cut). `run` prints and logs
its error and records it in `esper._esper_runs`; `doctor` prints its report and logs its retries.
Nothing of the key, 8 characters or more, may be in any of them. Every cut position is covered at
the client (`tests/source/test_redaction.py`); here, what the commands do with those texts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import ENTERPRISE_ID
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
    from esper_warehouse.pipelines.doctor import probes

    monkeypatch.setattr(probes, "BACKOFF_MAX_S", 0.01)  # its retries, not its waits, matter here
    server = serve(lambda seen: answer(kind))
    _environment(monkeypatch, server.url)
    warehouse = tmp_path / "warehouse.duckdb"
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
    }
    leaks = {where: key_fragments(text) for where, text in texts.items() if key_fragments(text)}
    assert sorted(leaks) == [], leaks
