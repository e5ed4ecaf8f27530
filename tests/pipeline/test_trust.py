"""Trust: no network beyond the API, errors that name their cause, one pipeline per dataset."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import API_KEY, ENTERPRISE_ID

from .helpers import ROOT

# Records every address a Python process connects to or looks up, in the file RECORD names.
AUDIT_HOOK = """
import json, os, sys

_record = os.environ["CONNECTIONS_RECORD"]

def _hook(event, args):
    if event == "socket.connect":
        address = args[1]
    elif event == "socket.getaddrinfo":
        address = (args[0], args[1])
    else:
        return
    with open(_record, "a") as out:
        out.write(json.dumps([event, repr(address)]) + "\\n")

sys.addaudithook(_hook)
"""
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _outside_repo_env(tmp_path: Path, sim: object) -> tuple[dict[str, str], Path]:
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(AUDIT_HOOK)
    record = tmp_path / "connections.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNTIME__", "DLT_"))}
    env.update(
        {
            "SOURCES__ESPER__BASE_URL": sim.base_url,  # type: ignore[attr-defined]
            "SOURCES__ESPER__API_KEY": API_KEY,
            "SOURCES__ESPER__ENTERPRISE_ID": ENTERPRISE_ID,
            "PYTHONPATH": os.pathsep.join([str(hook_dir), str(ROOT)]),
            "CONNECTIONS_RECORD": str(record),
        }
    )
    return env, record


@pytest.mark.parametrize("command", [["run", "--no-models"], ["status"]])
def test_cli_outside_the_repository_connects_to_loopback_only(
    sim, tmp_path: Path, command: list[str]
) -> None:
    import subprocess

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env, record = _outside_repo_env(tmp_path, sim)
    warehouse = elsewhere / "w.duckdb"
    if command[0] == "status":  # a warehouse to report on
        subprocess.run(
            [sys.executable, "-m", "esper_warehouse.pipelines.cli", "run", "--no-models",
             "--resources", "groups", "--warehouse", str(warehouse)],
            cwd=elsewhere, env={**env, "CONNECTIONS_RECORD": os.devnull}, check=True,
            capture_output=True, timeout=300,
        )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "esper_warehouse.pipelines.cli", *command, "--warehouse", str(warehouse)],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (elsewhere / ".dlt").exists()  # really without the project's config
    lines = record.read_text().splitlines() if record.exists() else []
    seen = [json.loads(line) for line in lines]
    if command[0] == "run":
        assert any("127.0.0.1" in address for _, address in seen)  # the hook does record
    beyond = [
        (event, address)
        for event, address in seen
        if not any(host in address for host in LOOPBACK) and not address.startswith("'/")
    ]
    assert beyond == [], beyond


# The tables counted before and after a refused run, and all the runs here load (the refusal comes
# before any request, whatever is selected; command_statuses brings its requests, `Table.needs`).
COUNTED = ("devices", "command_statuses", "device_events")
LOADED = list(COUNTED)


def _counts(warehouse: Path) -> dict[str, int]:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as con:
        return {
            table: con.sql(f"select count(*) from esper.{table}").fetchone()[0]  # type: ignore[index]
            for table in COUNTED
        }


@pytest.mark.parametrize(
    ("first", "second", "how"),
    [
        # a single-tenant file later listed in tenants.toml
        ("esper_warehouse", "esper_warehouse__acme", "esper-warehouse run --warehouse"),
        # a tenant's file later run by hand with `run --warehouse`: the same refusal the other
        # way round, in the slow tier (docs/decisions.md, "The slow tier")
        pytest.param(
            "esper_warehouse__acme",
            "esper_warehouse",
            "esper-warehouse run --tenant acme",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_second_pipeline_on_a_loaded_dataset_is_refused_not_appended(
    sim, warehouse: Path, first: str, second: str, how: str
) -> None:
    from esper_warehouse.pipelines.exit_codes import Exit

    from .helpers import load

    assert load(sim, warehouse, pipeline_name=first, resources=LOADED).exit_code == 0
    before = _counts(warehouse)
    assert before["devices"] > 0

    refused = load(sim, warehouse, pipeline_name=second, resources=LOADED)

    assert refused.exit_code == Exit.CONFIG
    assert f"belongs to the pipeline {first}" in (refused.error or "")
    assert how in (refused.error or "")
    assert _counts(warehouse) == before  # nothing appended
    assert load(sim, warehouse, pipeline_name=first, resources=LOADED).exit_code == 0  # still runs
    assert _counts(warehouse)["devices"] == before["devices"]


def _nothing_found(*args: object, **kwargs: object) -> object:
    """A lookup over nothing, as a missing data file made it: `next()` of an empty iterator."""
    return next(iter(()))


@pytest.mark.parametrize("verbose", [False, True])
def test_an_error_without_a_message_names_where_it_was_raised_and_v_prints_the_traceback(
    sim, warehouse: Path, monkeypatch: pytest.MonkeyPatch, capsys, verbose: bool
) -> None:
    from esper_warehouse.pipelines import cli
    from esper_warehouse.sources.esper.tables import catalogues as esper_resources

    monkeypatch.setattr(esper_resources, "read_all", _nothing_found)
    monkeypatch.setenv("SOURCES__ESPER__BASE_URL", sim.base_url)
    monkeypatch.setenv("SOURCES__ESPER__API_KEY", API_KEY)
    monkeypatch.setenv("SOURCES__ESPER__ENTERPRISE_ID", ENTERPRISE_ID)
    argv = ["run", "--warehouse", str(warehouse), "--no-models", "--lock-timeout", "5"]

    code = cli.main(argv + (["-v"] if verbose else []))

    err = capsys.readouterr().err
    failed = next(line for line in err.splitlines() if "run failed:" in line)
    assert code == 1
    assert "StopIteration" in failed
    assert "test_trust.py:" in failed and "_nothing_found" in failed  # where it was raised
    assert "generator raised StopIteration" in failed  # what the error around it said
    assert ("Traceback (most recent call last)" in err) is verbose
    assert API_KEY not in err


@pytest.mark.parametrize("path", [".demo.duckdb.dlt.lock", "warehouses/.acme.run.lock"])
def test_lock_files_are_ignored_by_git(path: str) -> None:
    import shutil
    import subprocess

    git = shutil.which("git")
    assert git, "git is needed to check .gitignore"
    done = subprocess.run(
        [git, "check-ignore", "--no-index", "-q", path], cwd=ROOT, capture_output=True
    )
    assert done.returncode == 0, f"{path} is not ignored: {done.stderr!r}"


def test_what_the_documents_steps_write_is_ignored_by_git() -> None:
    """Every file the commands of the README and the pages under docs/ write into the checkout (`--json doctor.json`, `cp …
    tenants.toml`, a PostgreSQL data folder, a `> simulate.log`) is ignored: following the
    documents leaves `git status` clean."""
    import re
    import shutil
    import subprocess

    from tests.docs import page, pages

    # docs/reference/cli.md is the commands' help (`--json PATH`): options, not steps
    readme = "\n".join(page(name) for name in pages() if name != "docs/reference/cli.md")
    written = {
        *re.findall(r"--json (\S+)", readme),
        *re.findall(r"^cp \S+ (\S+)", readme, re.MULTILINE),
        *(f"{d}/x" for d in re.findall(r"local_postgres (\.\w+)\)", readme)),
        *re.findall(r"> (\S+) 2>&1", readme),
    }
    assert {"doctor.json", "tenants.toml", ".pgdata/x", "simulate.log"} <= written
    git = shutil.which("git")
    assert git, "git is needed to check .gitignore"
    for path in sorted(written):
        done = subprocess.run(
            [git, "check-ignore", "--no-index", "-q", path], cwd=ROOT, capture_output=True
        )
        assert done.returncode == 0, f"{path} (written by the documents' steps) is not ignored"
