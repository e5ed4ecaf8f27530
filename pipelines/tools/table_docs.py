"""The documents' generated sections: the raw tables from the `Table` declarations, and the
reference pages from their one homes.

`python -m esper_warehouse.pipelines.tools.table_docs` rewrites every section that sits between
`<!-- generated: <name> ... -->` and `<!-- end: <name> -->` in a checked-out repository:

* docs/reference/raw-tables.md `raw-tables`: one row per declared table: its route, key (as
  declared) and its `Doc` (how it is read, what its columns mean, how it is kept up to date);
* docs/spec/README.md `table-routes`: one row per route a table declares: its tables, the
  envelope its `Doc` names, and the evidence (`live <n>` when live-shapes.json recorded it, else
  `spec` from the OpenAPI subset, else the `Doc`'s);
* docs/guide/real-tenant.md `doctor-requests`: how many requests `doctor` sends to the
  simulator, counted by running it (with and without `--data-tap`) against an embedded simulator;
* docs/reference/ `exit-codes`, `cli` and `marts`: written from `Exit`, the command's parsers and
  sql/marts/_marts.yml (`reference_docs`).

`--check` writes nothing and exits 1 naming the stale files. tests/source/test_declarations.py
fails when a section written from a declaration (`DECLARED`) differs from it,
tests/pipeline/test_doctor.py when the doctor count differs from the requests its own doctor run
counted: both name this command.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from esper_warehouse.sources.esper.table import Table
from esper_warehouse.sources.esper.tables import TABLES
from esper_warehouse.sources.esper.tables.data_tap_jobs import DATA_TAP_PATH

from ..exit_codes import Exit
from ..shapes.reference import live_document, norm_path, spec_reference
from . import reference_docs

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "python -m esper_warehouse.pipelines.tools.table_docs"
RAW_TABLES_PAGE = "docs/reference/raw-tables.md"
TENANT_PAGE = "docs/guide/real-tenant.md"
SPEC_README = "docs/spec/README.md"
# Devices and the seed of the simulator doctor is counted on (its count does not depend on them:
# one request per route, every parent list holding items).
DOCTOR_FLEET, DOCTOR_SEED = 120, 7


def _code(text: str) -> str:
    return f"`{text}`"


def _row(*cells: str) -> str:
    """A markdown table row; a `|` in a cell is escaped, so it cannot split the row."""
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def key_cell(table: Table) -> str:
    """The key as declared (`a`, `b`); an scd2 table's key identifies the rows valid now."""
    if not table.key:
        return "—"
    key = ", ".join(_code(k) for k in table.key)
    return f"{key} (of the rows valid now)" if table.disposition == "scd2" else key


def raw_tables(tables: Iterable[Table] | None = None) -> str:
    """The raw tables reference: one row per declared table."""
    rows = ["| table | from | key | kept up to date by |", "|---|---|---|---|"]
    for table in tables if tables is not None else TABLES.values():
        doc = table.doc
        source = " ".join(filter(None, (_code(f"GET {table.path}"), doc.read)))
        source += f": {doc.columns}" if doc.columns else ""
        rows.append(_row(_code(table.name), source, key_cell(table), doc.kept))
    return "\n".join(rows)


def live_number(path: str) -> int | None:
    """The route's number in live-shapes.json (answered 200), or None: no live recording."""
    for route in live_document()["routes"]:
        if norm_path(route["path"]) == norm_path(path) and route.get("status") == 200:
            return int(route["n"])
    return None


def evidence(table: Table) -> str:
    """What the route's shape rests on: `live <n>` when recorded, and the `Doc`'s evidence; with
    neither, `spec` when the OpenAPI subset has the route."""
    number = live_number(table.path)
    found = [f"live {number}"] if number is not None else []
    found += [str(table.doc.evidence)] if table.doc.evidence else []
    if not found and spec_reference("GET", table.path) is not None:
        found.append("spec")
    return "; ".join(found)


def routes_of(tables: Iterable[Table]) -> dict[str, list[Table]]:
    """Route -> the tables that declare it, in declaration order."""
    found: dict[str, list[Table]] = {}
    for table in tables:
        found.setdefault(table.path, []).append(table)
    return found


def table_routes(tables: Iterable[Table] | None = None) -> str:
    """docs/spec/README.md: one row per route the declared tables read."""
    rows = ["| route | raw tables | envelope | reference |", "|---|---|---|---|"]
    for path, declaring in routes_of(tables if tables is not None else TABLES.values()).items():
        names = ", ".join(_code(t.name) for t in declaring)
        envelope = next((t.doc.envelope for t in declaring if t.doc.envelope), "")
        rows.append(_row(_code(f"GET {path}"), names, envelope, evidence(declaring[0])))
    return "\n".join(rows)


def doctor_requests(routes: Mapping[str, int]) -> str:
    """The guide's count of doctor's requests, from a simulator's per-route counts of one doctor
    run with `--data-tap` (`Simulator.stats()["routes"]`)."""
    total = sum(routes.values())
    plain = sum(n for route, n in routes.items() if DATA_TAP_PATH not in route)
    return f"{plain} requests on the simulator, {total} with `--data-tap`"


def measure_doctor() -> str:
    """`doctor_requests` of a doctor run (with Data Tap) against an embedded simulator."""
    from esper_warehouse.simulator import Simulator

    from ..views.doctor.probes import probe

    key = "table-docs-key-0123456789"
    sim = Simulator(devices=DOCTOR_FLEET, seed=DOCTOR_SEED, api_key=key).start()
    try:
        result = probe(sim.base_url, key, sim.enterprise_id, data_tap_sql="select 1 as one")
        if result.exit_code != 0:
            raise RuntimeError(f"doctor on the simulator ended {result.exit_code}: not counted")
        return doctor_requests(sim.stats()["routes"])
    finally:
        sim.stop()


# section -> (file, what writes it); a block section's text sits on lines of its own
SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "raw-tables": (RAW_TABLES_PAGE, raw_tables),
    "table-routes": (SPEC_README, table_routes),
    "doctor-requests": (TENANT_PAGE, measure_doctor),
    "exit-codes": ("docs/reference/exit-codes.md", reference_docs.exit_codes_table),
    "cli": ("docs/reference/cli.md", reference_docs.cli_reference),
    "marts": ("docs/reference/marts.md", reference_docs.marts_reference),
}
# Written from the declarations alone (no simulator).
DECLARED = ("raw-tables", "table-routes", "exit-codes", "cli", "marts")


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated: {re.escape(name)}\b[^>]*-->)(.*?)(<!-- end: {re.escape(name)} -->)",
        re.DOTALL,
    )


def section(text: str, name: str) -> str:
    """The text between a section's markers (a block section without its surrounding newlines).

    Raises:
        ValueError: the markers are missing.
    """
    found = _pattern(name).search(text)
    if found is None:
        raise ValueError(
            f"no section {name!r} (<!-- generated: {name} --> ... <!-- end: {name} -->)"
        )
    body = found.group(2)
    return body[1:-1] if body.startswith("\n") and body.endswith("\n") else body


def replaced(text: str, name: str, body: str) -> str:
    """`text` with section `name` holding `body` (a block section keeps its own lines)."""
    current = _pattern(name).search(text)
    if current is None:
        section(text, name)  # raises, naming the markers
    assert current is not None
    block = current.group(2).startswith("\n")
    inner = f"\n{body}\n" if block else body
    return text[: current.start(2)] + inner + text[current.end(2) :]


def stale(names: Iterable[str] = DECLARED, root: Path = ROOT) -> list[str]:
    """`file: section` for every section whose text differs from what it is written from."""
    return [
        f"{SECTIONS[name][0]}: {name}"
        for name in names
        if section((root / SECTIONS[name][0]).read_text(), name) != SECTIONS[name][1]()
    ]


def write(names: Iterable[str], root: Path = ROOT) -> list[str]:
    """Rewrite the sections `names`; the files changed."""
    changed = []
    for name in names:
        path = root / SECTIONS[name][0]
        text = path.read_text()
        new = replaced(text, name, SECTIONS[name][1]())
        if new != text:
            path.write_text(new)
            changed.append(f"{SECTIONS[name][0]}: {name}")
    return changed


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated sections (or, with `--check`, name the stale ones); the exit code."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    parser.add_argument(
        "--no-doctor", action="store_true", help="leave the doctor count (it starts a simulator)"
    )
    args = parser.parse_args(argv)
    names = [n for n in SECTIONS if not (args.no_doctor and n not in DECLARED)]
    if args.check:
        found = stale(names)
        print("\n".join(f"stale: {s}" for s in found) or "up to date")
        return Exit.FAILED if found else Exit.OK  # a stale section fails like a data test
    changed = write(names)
    print("\n".join(f"rewrote {c}" for c in changed) or "up to date")
    return Exit.OK


if __name__ == "__main__":
    sys.exit(main())
