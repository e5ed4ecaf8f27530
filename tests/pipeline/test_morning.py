"""`status` is the morning alarm, and a night that loaded nothing ages every number (README
"Every morning"): after a failed, interrupted or killed night `status` exits 8 with the cause and
the last good load, and every table family and headline says how old it is; a run that gave up
waiting for the lock did not start; no load for longer than the warning age (a scheduler that
stopped) is an alarm too; a good night after all of it reads current again."""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.exit_codes import Exit
from esper_warehouse.pipelines.run.runner import summary
from esper_warehouse.pipelines.views.status import status
from esper_warehouse.pipelines.warehouse import run_lock

from .helpers import ROOT, cli, load
from .test_run_kills import killed_run


def families(wh: Path) -> list[tuple[str, bool, str | None]]:
    """Every table family: its name, whether it is behind, its age note."""
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(
            "select family, is_behind, age_note from intermediate.int_family_freshness "
            "order by family"
        ).fetchall()


def headline_ages(wh: Path) -> list[tuple[str, str | None]]:
    """Every headline's own row (not its items): its name and its age note."""
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(
            "select headline, age_note from marts.headlines where item is null order by 1"
        ).fetchall()


def morning(wh: Path, capsys: Any) -> tuple[int, str, str]:
    """`status`: its exit code, stdout and stderr."""
    capsys.readouterr()
    code = status(wh)
    out, err = capsys.readouterr()
    return code, out, err


def freshness_block(out: str) -> list[str]:
    """`status`'s freshness block: one line per table family."""
    block = out.split("\nfreshness (", 1)[1].splitlines()[1:]
    return [line for line in block[: next(i for i, x in enumerate(block) if x[:2] != "  ")]]


def readme_cron_check(wh: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """README "Every morning"'s cron command, as pasted, in `folder` standing for the project's
    folder (its `.venv`, and `wh` copied to the default warehouse file)."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("\n## Every morning\n", 1)[1].split("```cron\n", 1)[1].split("```")[0]
    (line,) = [x for x in block.splitlines() if x[:1].isdigit()]
    command = line.split(None, 5)[5].replace("/opt/esper-warehouse", str(folder))
    folder.mkdir()
    (folder / ".venv").symlink_to(ROOT / ".venv")
    shutil.copyfile(wh, folder / "esper_warehouse.duckdb")
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120)


def at(when: datetime) -> str:
    return f"{when:%Y-%m-%d %H:%M} UTC"


def test_a_failed_night_ages_every_number_and_status_says_why_until_a_good_night(
    sim, wh: Path, modelled_first_load, capsys
) -> None:
    good = modelled_first_load(wh)
    sim.advance(24)
    sim.set_faults([{"kind": "status", "status": 500, "route": "/v2/devices/*"}])
    failed = load(sim, wh, build_models=True)
    assert failed.exit_code == Exit.API, failed.error
    assert failed.as_of == sim.now  # the API time the failed run saw (the 500s' Date)
    assert "None" not in summary(failed).splitlines()[0]

    note = f"as of {at(good.as_of)} (24 h old: the run of {at(failed.as_of)} failed)"
    rows = families(wh)
    assert rows and all(behind and age == note for _family, behind, age in rows), rows
    ages = headline_ages(wh)
    assert ages and all(age and note in age for _headline, age in ages), ages

    code, out, err = morning(wh, capsys)
    assert code == Exit.NOT_LOADED == 8, err
    assert "the last night did not load: the run started" in err
    assert f"(API time {at(failed.as_of)}) failed" in err
    assert "cause: " in err and "GET /v2/devices/" in err and "500" in err
    assert "last good load: the run started" in err and f"(API time {at(good.as_of)})" in err
    shown = freshness_block(out)
    assert len(shown) == len(rows) and all(note in line for line in shown), shown
    assert "None" not in out

    alert = readme_cron_check(wh, wh.parent / "project")
    assert alert.stdout == "esper-warehouse status exited 8\n", alert.stderr
    assert "error: the last night did not load" in alert.stderr and "cause: " in alert.stderr

    sim.clear_faults()
    again = load(sim, wh, build_models=True)
    assert again.exit_code == Exit.OK, again.error
    # every family current, but those an incremental run does not read (the census: full
    # scans only), which are as old as they were before the failed night
    after = {family: age for family, behind, age in families(wh) if behind}
    assert all(age.endswith(": not read by the runs since)") for age in after.values()), after
    assert all(age is None or "failed" not in age for _headline, age in headline_ages(wh))
    code, out, err = morning(wh, capsys)
    assert code == Exit.OK, err
    shown = freshness_block(out)
    assert sum(line.endswith("(current)") for line in shown) == len(shown) - len(after), out


def test_a_killed_night_is_a_night_that_loaded_nothing(
    sim, wh: Path, modelled_first_load, capsys
) -> None:
    good = modelled_first_load(wh)
    sim.advance(24)
    killed = killed_run(sim, wh, "first-job-start")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]

    code, _out, err = morning(wh, capsys)
    assert code == Exit.NOT_LOADED, err
    assert "never recorded its end (killed or stopped)" in err
    assert "last good load: the run started" in err and f"(API time {at(good.as_of)})" in err

    build_models(wh)  # as the next run's build does: the killed night is counted by the wall
    for _family, behind, age in families(wh):  # clock, as it saw no API time it recorded
        assert behind and age and "never recorded its end" in age, age


def test_an_interrupted_night_is_a_night_that_loaded_nothing(
    sim, wh: Path, first_load, capsys
) -> None:
    first_load(wh)
    sim.advance(24)
    sim.set_faults([{"kind": "latency", "ms": 300}])  # every answer slow: extraction lasts
    process = cli(sim, wh, "run")
    assert process.stderr is not None
    for line in process.stderr:
        if "extract: started" in line:
            break
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == Exit.INTERRUPTED, err[-2000:]

    code, _out, err = morning(wh, capsys)
    assert code == Exit.NOT_LOADED, err
    assert f"(API time {at(sim.now)}) was interrupted" in err
    assert "cause: interrupted" in err


def test_a_run_that_gave_up_on_the_lock_did_not_start_and_ages_nothing(
    sim, wh: Path, modelled_first_load, capsys
) -> None:
    modelled_first_load(wh)
    with run_lock(wh, 0):  # another run holds the warehouse
        locked = load(sim, wh, lock_timeout_s=0, build_models=True)
    assert locked.exit_code == Exit.LOCKED
    assert summary(locked).splitlines()[0].startswith("run not started (locked), ")
    assert all(not behind for _family, behind, _age in families(wh))
    code, out, err = morning(wh, capsys)
    assert code == Exit.OK, err
    runs = out.split("last runs:\n", 1)[1].split("\nfreshness", 1)[0].splitlines()
    assert len(runs) == 1 and " ok " in runs[0], runs  # the one run that loaded
    assert all(line.endswith("(current)") for line in freshness_block(out)), out


def test_no_load_for_longer_than_the_warning_age_is_an_alarm(
    sim, wh: Path, first_load, capsys
) -> None:
    """A scheduler that stopped: nothing runs, so nothing is recorded; the wall clock since the
    last load says it (the runs' times are moved back 49 h, as two days without a run leave them)."""
    first_load(wh)
    assert morning(wh, capsys)[0] == Exit.OK
    with duckdb.connect(str(wh)) as con:
        con.execute(
            "update esper._esper_runs set started_at = started_at - interval 49 hours, "
            "finished_at = finished_at - interval 49 hours"
        )
    code, _out, err = morning(wh, capsys)
    assert code == Exit.NOT_LOADED, err
    assert "no run has loaded for more than 48 h of wall-clock time" in err
    assert "last good load: the run started" in err and "2 days ago" in err


def test_a_night_without_any_answer_says_so_in_words(
    sim, wh: Path, modelled_first_load, capsys
) -> None:
    good = modelled_first_load(wh)
    sim.set_faults([{"kind": "drop", "route": "*"}])  # no answer at all: no API time
    failed = load(sim, wh, build_models=True, client_options={"max_retries": 1})
    assert failed.exit_code == Exit.API, failed.error
    assert failed.as_of is None
    first = summary(failed).splitlines()[0]
    assert "None" not in first and "no API time: no answer was read" in first

    code, out, err = morning(wh, capsys)
    assert code == Exit.NOT_LOADED, err
    assert "(no API time: no answer was read) failed" in err
    assert "None" not in out and "no API time" in out
    # placed by the wall clock: seconds after the good run, so 0 h older, and why
    for _family, behind, age in families(wh):
        assert behind and age.startswith(f"as of {at(good.as_of)} (0 h old: the run of "), age


def test_a_file_that_is_no_warehouse_is_said_once_and_not_recorded(
    sim, tmp_path: Path, caplog
) -> None:
    for name, content in (("empty.duckdb", b""), ("foreign.duckdb", b"not a database\n")):
        wh = tmp_path / name
        wh.write_bytes(content)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="esper_warehouse"):
            result = load(sim, wh)
        assert result.exit_code == Exit.CONFIG
        assert "is not a DuckDB warehouse or is damaged" in (result.error or "")
        assert "could not record the run" not in caplog.text
        assert "IOException" not in caplog.text
        assert wh.read_bytes() == content
