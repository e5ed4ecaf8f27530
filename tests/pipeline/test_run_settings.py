"""Settings are checked before the first request: exit 2 naming the setting and what it accepts."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.held import load_memory_for
from esper_warehouse.pipelines.run.runner import RunSettings
from esper_warehouse.sources.esper import esper
from esper_warehouse.sources.esper.settings import ENV_PREFIX, SETTINGS

from .helpers import ROOT, cli, compare, load, reading


@pytest.mark.parametrize(
    ("env", "named", "accepted"),
    [
        ({"SOURCES__ESPER__PAGE_SIZE": "abc"}, "PAGE_SIZE", "a whole number from 1 to 1000"),
        ({"PAGE_SIZE": "-5"}, "PAGE_SIZE", "from 1 to 1000"),  # dlt reads the bare name too
        ({"SOURCES__ESPER__LAG_HOURS": "-48"}, "LAG_HOURS", "a number from 0 to 720"),
        ({"SOURCES__ESPER__MAX_CONCURRENCY": "0"}, "MAX_CONCURRENCY", "from 1 to 256"),
        (
            {"SOURCES__ESPER__INITIAL_CONCURRENCY": "40", "SOURCES__ESPER__MAX_CONCURRENCY": "8"},
            "INITIAL_CONCURRENCY (40) must not exceed",
            "MAX_CONCURRENCY (8)",
        ),
        ({"SOURCES__ESPER__REQUEST_TIMEOUT": "0"}, "REQUEST_TIMEOUT", "from 0.1 to 3600"),
        ({"SOURCES__ESPER__MAX_RETRY_WAIT_S": "-1"}, "MAX_RETRY_WAIT_S", "from 0 to 86400"),
        ({"SOURCES__ESPER__MAX_RETRIES": "many"}, "MAX_RETRIES", "from 0 to 20"),
        ({"SOURCES__ESPER__FULL_SCAN_INTERVAL_DAYS": "-7"}, "FULL_SCAN_INTERVAL_DAYS", "0 to"),
        ({"SOURCES__ESPER__STATUS_BATCH_SIZE": "2.5"}, "STATUS_BATCH_SIZE", "a whole number"),
        ({"SOURCES__ESPER__HEARTBEAT_START_DAYS": "nan"}, "HEARTBEAT_START_DAYS", "0 to 3650"),
        ({"SOURCES__ESPER__FULL_SCAN": "maybe"}, "FULL_SCAN", "true or false"),
        ({"SOURCES__ESPER__DATA_TAP_ROW_LIMIT": "0"}, "DATA_TAP_ROW_LIMIT", "from 1 to"),
        ({"SOURCES__ESPER__DATA_TAP_DEADLINE_S": "0"}, "DATA_TAP_DEADLINE_S", "from 1 to 86400"),
        ({"SOURCES__ESPER__DATA_TAP_STUCK_S": "-1"}, "DATA_TAP_STUCK_S", "from 1 to 86400"),
        ({"SOURCES__ESPER__DATA_TAP_QUERIES": "select 1"}, "DATA_TAP_QUERIES", "a JSON object"),
        (
            {"SOURCES__ESPER__DATA_TAP_QUERIES": '{"h": {"sql": "select 1", "cursor": "d"}}'},
            "DATA_TAP_QUERIES",
            "{sql, cursor, key, lag_days, start}",
        ),
        (
            {"SOURCES__ESPER__DATA_TAP_QUERIES": '{"Battery Now": "select 1"}'},
            "'Battery Now'",
            "lower-case identifier",
        ),
    ],
)
def test_a_bad_setting_is_exit_2_naming_it_before_any_request(
    sim, tmp_path: Path, monkeypatch, env: dict[str, str], named: str, accepted: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    wh = tmp_path / "warehouse.duckdb"
    result = load(sim, wh)
    assert result.exit_code == Exit.CONFIG, result.error
    assert named in (result.error or "") and accepted in (result.error or ""), result.error
    assert sim.stats()["total"] == 0
    assert not wh.exists()


def test_a_negative_lock_timeout_is_a_config_error(sim, tmp_path: Path) -> None:
    result = load(sim, tmp_path / "warehouse.duckdb", lock_timeout_s=-1)
    assert result.exit_code == Exit.CONFIG
    assert "lock_timeout_s = -1" in (result.error or "") and ">= 0" in (result.error or "")


def test_the_command_line_says_which_setting_in_one_line(sim, tmp_path: Path) -> None:
    process = cli(sim, tmp_path / "w.duckdb", "run", env={"SOURCES__ESPER__PAGE_SIZE": "abc"})
    out, err = process.communicate(timeout=60)
    assert process.returncode == Exit.CONFIG, err[-2000:]
    assert "SOURCES__ESPER__PAGE_SIZE (sources.esper.page_size) = 'abc'" in out + err
    assert "Traceback" not in err and "invalid literal" not in out + err
    assert sim.stats()["total"] == 0


@pytest.mark.parametrize("name", ["secrets.toml", "config.toml"])
def test_a_toml_file_with_a_syntax_error_is_one_line_naming_file_and_line(
    sim, tmp_path: Path, name: str
) -> None:
    folder = tmp_path / ".dlt"
    folder.mkdir()
    (folder / name).write_text('[sources.esper]\nlag_hours = 2\napi_key = "unclosed\n')
    process = cli(sim, tmp_path / "w.duckdb", "run", cwd=tmp_path)
    out, err = process.communicate(timeout=60)
    assert process.returncode == Exit.CONFIG, err[-2000:]
    text = out + err
    assert "Traceback" not in text
    (line,) = [x for x in text.splitlines() if "not valid TOML" in x]
    assert str(folder / name) in line and "line 3" in line, line
    assert sim.stats()["total"] == 0


def test_a_negative_lag_is_refused_so_no_device_is_lost(
    sim, tmp_path: Path, first_load, monkeypatch
) -> None:
    """Issue 13: `LAG_HOURS=-48` ran and moved every watermark 48 h into the future; the next
    normal run then never read a device, its apps, events and heartbeat changed meanwhile."""
    wh = tmp_path / "warehouse.duckdb"
    assert first_load(wh).exit_code == 0
    sim.advance(hours=24)
    sim.reset_stats()
    monkeypatch.setenv("SOURCES__ESPER__LAG_HOURS", "-48")
    refused = load(sim, wh)
    assert refused.exit_code == Exit.CONFIG and "LAG_HOURS" in (refused.error or "")
    assert sim.stats()["total"] == 0
    monkeypatch.delenv("SOURCES__ESPER__LAG_HOURS")
    sim.advance(hours=24)
    compared = ("devices", "device_apps", "device_events", "heartbeats", "command_statuses")
    normal = load(sim, wh, resources=list(compared))  # command_statuses brings its requests
    assert normal.exit_code == 0, normal.error
    with reading(wh):
        for table in compared:
            compare(sim, wh, table, exact=table not in ("devices", "device_events", "heartbeats"))


def test_every_source_setting_is_declared_once_with_a_range() -> None:
    """The declaration covers exactly the source's settings, with the source's defaults."""
    parameters = inspect.signature(esper).parameters
    settings = {n: p.default for n, p in parameters.items()
                if n not in ("api_key", "api_key_name", "base_url", "base_url_name", "enterprise_id", "client", "ledger")}  # fmt: skip
    assert set(settings) == set(SETTINGS)
    for name, default in settings.items():
        assert SETTINGS[name].default == default, name


def _readme_default(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(format(v, "g") for v in value)
    return format(value, "g")


def test_the_settings_reference_lists_every_setting_with_its_variable_and_default() -> None:
    table = (ROOT / "docs" / "reference" / "settings.md").read_text()
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and (match := re.fullmatch(r"`(\w+)`", cells[0])):
            rows[match.group(1)] = cells
    for name, spec in SETTINGS.items():
        assert name in rows, f"docs/reference/settings.md has no row for {name}"
        _, variable, default, *_ = rows[name]
        assert f"`{ENV_PREFIX}{name.upper()}`" in variable, (name, variable)
        assert re.match(rf"`{re.escape(_readme_default(spec.default))}`|none", default), (
            name,
            default,
        )


def test_a_setting_s_meaning_reads_the_same_in_the_reference_and_the_config_file() -> None:
    """A setting whose declaration says what it does (`Setting.doc`): the settings reference's
    table and .dlt/config.toml's comment say exactly that (`data_tap_stuck_s` only warns: the
    config file once said it resubmitted)."""
    readme = (ROOT / "docs" / "reference" / "settings.md").read_text()
    config = (ROOT / ".dlt" / "config.toml").read_text()
    documented = {name: spec.doc for name, spec in SETTINGS.items() if spec.doc}
    assert "data_tap_stuck_s" in documented
    for name, doc in documented.items():
        row = re.search(rf"^\| `{name}` \|.*\| ([^|]*) \|$", readme, re.MULTILINE)
        assert row and row.group(1) == doc, (name, row and row.group(1))
        line = re.search(rf"^#? ?{name} = [^#\n]*# (.*)$", config, re.MULTILINE)
        assert line and line.group(1) == doc, (name, line and line.group(1))


def test_the_loads_memory_follows_the_fleet_unless_set(tmp_path: Path) -> None:
    unset = RunSettings(warehouse=tmp_path / "w.duckdb")
    assert load_memory_for(unset, None) == "512MB"
    assert load_memory_for(unset, 99_999) == "512MB"
    assert load_memory_for(unset, 150_000) == "256MB", "a big fleet stays under 1.5 GB"
    chosen = RunSettings(warehouse=tmp_path / "w.duckdb", load_memory_limit="2GB")
    assert load_memory_for(chosen, 150_000) == "2GB", "a limit that is set wins"
