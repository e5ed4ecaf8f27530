"""`esper-warehouse doctor`: its options, then read the settings, probe, print the report, write
the JSON. The probe and its report are pipelines/views/doctor/ (`probes.py`, `report.py`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from esper_warehouse.sources.esper.http import EsperConfigError
from esper_warehouse.sources.esper.settings import SETTINGS, SettingError, changed, resolve_settings

from ..exit_codes import Exit
from ..run.failures import toml_problem
from ..views.doctor.probes import probe
from ..views.doctor.report import render
from . import Subcommand, config_options


def _arguments(doctor: argparse.ArgumentParser) -> None:
    doctor.add_argument(
        "--json", type=Path, metavar="PATH", help="also write the report as JSON to this file"
    )
    doctor.add_argument(
        "--data-tap",
        nargs="?",
        const="select 1 as one",
        metavar="SQL",
        help="also submit one Data Tap query (default: select 1 as one) and read its status",
    )


def run(
    base_url: str | None,
    api_key: str | None,
    enterprise_id: str | None,
    *,
    json_path: Path | None = None,
    data_tap_sql: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    settings: dict[str, object] | None = None,
) -> int:
    """The `doctor` command: probe, print the report, write the JSON; the exit code.

    `settings`: the source's settings not at their default (`settings.changed`), shown in the
    report as what a run would use.
    """
    out, err = out or sys.stdout, err or sys.stderr
    given = {"base_url": base_url, "api_key": api_key, "enterprise_id": enterprise_id}
    missing = [SETTINGS[name].env for name, value in given.items() if not value]
    if missing:
        print(f"doctor: missing configuration: {', '.join(missing)}", file=err)
        return Exit.CONFIG
    try:
        result = probe(str(base_url), str(api_key), str(enterprise_id), data_tap_sql=data_tap_sql)
    except EsperConfigError as error:
        print(f"doctor: {error}", file=err)  # the client's texts never hold the key
        return Exit.CONFIG
    result.settings = dict(settings or {})
    print(_without(render(result), str(api_key)), file=out)
    if json_path is not None:
        text = json.dumps(result.as_json(), indent=2) + "\n"
        json_path.write_text(_without(text, str(api_key)))
        print(f"JSON report: {json_path}", file=out)
    return result.exit_code


def _without(text: str, secret: str) -> str:
    """The text with the API key masked: a last guard, the report already holds no values."""
    return text.replace(secret, "<api key>") if len(secret) >= 4 else text


def main(json_path: Path | None = None, data_tap_sql: str | None = None) -> int:
    """Read the source's settings as a run does (dlt: environment, `.dlt/`), check them, and run
    the probe; a setting outside what it accepts is exit 2, as it is for a run."""
    try:
        config = resolve_settings(accept_partial=True)  # a missing one is named by `run`
    except SettingError as error:
        print(f"doctor: {error}", file=sys.stderr)
        return Exit.CONFIG
    except Exception as error:
        if (problem := toml_problem(error)) is None:
            raise
        print(f"doctor: {problem}", file=sys.stderr)
        return Exit.CONFIG
    return run(
        config.base_url,
        config.api_key,
        config.enterprise_id,
        json_path=json_path,
        data_tap_sql=data_tap_sql,
        settings=changed(config),
    )


def _command(args: argparse.Namespace) -> int:
    return main(json_path=args.json, data_tap_sql=args.data_tap)


SUBCOMMAND = Subcommand(
    "read-only probe of the tenant's answers against what the source expects "
    "(exit 3: a shape that would break a run; 6: a run would be partial)",
    run=_command,
    parents=lambda: [config_options()],
    arguments=_arguments,
)
