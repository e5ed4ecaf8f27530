"""One declaration per raw table (`sources/esper/tables/`, a `Table` each) against every copy.

The source's dlt hints, the runner's companions and fallbacks, the extraction order, a staging
view each, and the documents' sections written from the declarations (docs/reference/raw-tables.md,
docs/spec/README.md's table routes: `pipelines/tools/table_docs.py`) must say what the declarations say. The empty raw tables of the SQL build are made
from the declarations (tests/sql/test_runner.py checks them).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dlt
import esper_warehouse.sources.esper as esper_package
import pytest
from dlt.common.schema.utils import get_columns_names_with_prop
from dlt.extract.source import DltSource
from esper_warehouse.pipelines import bookkeeping
from esper_warehouse.pipelines.run.dispositions import COMPANIONS, merge_where_needed
from esper_warehouse.pipelines.shapes import families, reference
from esper_warehouse.pipelines.tools import table_docs
from esper_warehouse.sources.esper import RunLedger, esper
from esper_warehouse.sources.esper.arrow import ROW_VERSION
from esper_warehouse.sources.esper.run.ledger import TIME_KEYS, RunPlan
from esper_warehouse.sources.esper.scan.walk import DeviceWalk
from esper_warehouse.sources.esper.settings import resolve_settings
from esper_warehouse.sources.esper.table import TS
from esper_warehouse.sources.esper.tables import MODULES, TABLES, read_from

ROOT = Path(__file__).resolve().parents[2]
AS_OF = datetime(2026, 10, 1, 2, 30, tzinfo=UTC)
UNUSED = {"api_key": "unused", "base_url": "https://unused.invalid/api", "enterprise_id": "unused"}
# What each declared disposition is in dlt: (write_disposition, merge strategy or None).
DLT_DISPOSITION = {
    "merge": ("merge", None),
    "insert-only": ("merge", "insert-only"),
    "replace": ("replace", None),
    "scd2": ("merge", "scd2"),
}


def _source(monkeypatch: pytest.MonkeyPatch, *, full_scan: bool) -> DltSource:
    """The `esper` source of a first load (`full_scan`) or of a nightly run, without requests."""

    def opened(client: Any, ledger: RunLedger, full: bool, interval: Any) -> None:
        ledger.plan = RunPlan(client=client, as_of=AS_OF, full_scan=full_scan)

    monkeypatch.setattr(esper_package, "open_run", opened)
    return esper(
        resolve_settings({**UNUSED, "full_scan": full_scan}),
        client=object(),  # no resource runs: only the hints are read
    )  # no ledger: a full scan in one piece, every resource (a caller's ledger may ask parts)


def test_a_full_scan_comes_in_parts_only_to_a_caller_holding_the_ledger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """dlt running the source alone cannot ask for the next part: its full scan is one piece,
    every table. The pipeline, holding the ledger, gets a devices part first
    (`commit_every_minutes` is on by default) and asks for the rest."""
    monkeypatch.setattr(DeviceWalk, "has_more", lambda self: True)  # devices remain to be read
    alone = _source(monkeypatch, full_scan=True)
    assert set(alone.resources) == set(TABLES)
    first = esper(resolve_settings(UNUSED), client=object(), ledger=RunLedger())
    assert set(first.resources) == {"devices", "device_history", "device_apps", "device_events"}


def _hints(source: DltSource) -> dict[str, tuple[Any, dict]]:
    """Table -> (its resource, `compute_table_schema()`), for every resource of `source`."""
    found = {}
    for resource in source.resources.values():
        schema = resource.compute_table_schema()
        found[schema["name"]] = (resource, schema)
    return found


@pytest.mark.parametrize("full_scan", [True, False], ids=["first load", "nightly"])
def test_every_resource_has_the_hints_its_declaration_gives(
    monkeypatch: pytest.MonkeyPatch, full_scan: bool
) -> None:
    """Name, write disposition, merge strategy, primary and merge key, columns: as declared."""
    hints = _hints(_source(monkeypatch, full_scan=full_scan))
    # device_census only comes with a complete device scan
    assert set(hints) == set(TABLES) - (set() if full_scan else {"device_census"})
    problems = []
    for table, (resource, schema) in sorted(hints.items()):
        endpoint = TABLES[table]
        disposition, strategy = DLT_DISPOSITION[endpoint.disposition]
        scd2 = endpoint.disposition == "scd2"
        expected = {
            "write_disposition": disposition,
            "strategy": strategy,
            "primary_key": [] if scd2 else list(endpoint.key),
            "merge_key": [endpoint.merge_key] if endpoint.merge_key else [],
            "columns": {c.name: c.type for c in TABLES[table].columns},
        }
        actual = {
            "write_disposition": schema["write_disposition"],
            "strategy": schema.get("x-merge-strategy"),
            "primary_key": get_columns_names_with_prop(schema, "primary_key"),
            "merge_key": get_columns_names_with_prop(schema, "merge_key"),
            "columns": {  # dlt's own columns (scd2 validity) and the row version apart
                c: col.get("data_type")
                for c, col in schema["columns"].items()
                if not c.startswith("_dlt_") and c != ROW_VERSION
            },
        }
        problems += [
            f"{table}: {hint} is {actual[hint]!r}, declared {expected[hint]!r}"
            for hint in expected
            if actual[hint] != expected[hint]
        ]
        if scd2:  # the row version is declared; the validity boundary is the run's API time
            wd = resource.write_disposition
            assert wd["row_version_column_name"] == ROW_VERSION, table
            assert schema["columns"][ROW_VERSION]["x-row-version"] is True, table
            assert wd["boundary_timestamp"] == AS_OF, table
        else:
            assert ROW_VERSION not in schema["columns"], table
    assert problems == [], "\n".join(problems)


def test_a_destination_without_insert_only_merges_by_dlts_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`insert-only` where the destination has it (DuckDB), dlt's default merge elsewhere."""
    insert_only = [t for t, e in TABLES.items() if e.disposition == "insert-only"]
    assert insert_only, "no table is declared insert-only: this test checks nothing"

    source = _source(monkeypatch, full_scan=False)
    duckdb = dlt.pipeline("decl", destination="duckdb", pipelines_dir=str(tmp_path))
    merge_where_needed(source, duckdb)
    hints = _hints(source)
    assert {t: hints[t][1].get("x-merge-strategy") for t in insert_only} == dict.fromkeys(
        insert_only, "insert-only"
    )

    source = _source(monkeypatch, full_scan=False)
    lacking = SimpleNamespace(  # a destination whose merge knows only delete-insert
        destination=SimpleNamespace(
            capabilities=lambda: SimpleNamespace(supported_merge_strategies=["delete-insert"])
        )
    )
    merge_where_needed(source, lacking)  # type: ignore[arg-type]
    hints = _hints(source)
    for table in insert_only:
        schema = hints[table][1]
        assert schema["write_disposition"] == "merge", table
        assert "x-merge-strategy" not in schema, table
        assert get_columns_names_with_prop(schema, "primary_key") == list(TABLES[table].key)


def test_the_declaration_is_consistent() -> None:
    """Every declared table has columns; keys, merge keys and cursors are declared columns."""
    declared = [t.name for module in MODULES for t in module.TABLES]
    assert sorted(declared) == sorted(TABLES), "a table declared twice (the later one wins)"
    for table, e in TABLES.items():
        assert e.name == table
        types = {c.name: c.type for c in TABLES[table].columns}
        for column in (*e.key, *([e.merge_key] if e.merge_key else [])):
            assert column in types, f"{table}: key column {column} is not a declared column"
        if e.cursor is not None:
            assert types.get(e.cursor) == TS, f"{table}: cursor {e.cursor} is not a timestamp"
        assert (e.merge_key is not None) == (e.disposition == "scd2"), table
        assert e.loaded_with is None or e.loaded_with in TABLES, table
        assert set(e.needs) <= set(TABLES) - {table}, table
        assert e.disposition == "replace" or e.key, f"{table}: merged without a key"
        # key timestamps arrive as ISO text and are fingerprinted as instants (reconciliation)
        assert {c for c in e.key if types[c] == TS} <= TIME_KEYS, table


def test_companions_are_the_declared_loaded_with() -> None:
    declared = {(e.loaded_with, t) for t, e in TABLES.items() if e.loaded_with}
    assert {(p, t) for p, tables in COMPANIONS.items() for t in tables} == declared
    assert COMPANIONS["devices"] == ("device_history", "device_census")


def _markdown_rows(text: str) -> dict[str, list[str]]:
    """First-cell table names (`name` or `a`, `b`) -> the row's cells, of a markdown table."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 3:
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells
    return rows


def _section(path: Path, start: str) -> str:
    text = path.read_text()
    assert start in text, f"{path.name}: no section {start!r}"
    return text.split(start, 1)[1].split("\n## ", 1)[0]


def test_the_documents_say_what_the_declarations_say() -> None:
    """The raw tables reference's rows and docs/spec/README.md's table routes, whole: route, key, how
    each table is read and kept, its envelope and evidence, as the declarations give them."""
    stale = table_docs.stale()
    assert stale == [], f"{stale}: run `{table_docs.COMMAND}` and commit what it rewrites"


def test_a_section_edited_by_hand_is_stale_and_the_command_rewrites_it(tmp_path: Path) -> None:
    for name in table_docs.DECLARED:
        target = tmp_path / table_docs.SECTIONS[name][0]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((ROOT / table_docs.SECTIONS[name][0]).read_text())
    table_docs.write(table_docs.DECLARED, root=tmp_path)  # whatever the checkout holds
    assert table_docs.stale(root=tmp_path) == []
    page = tmp_path / table_docs.RAW_TABLES_PAGE
    page.write_text(page.read_text().replace("| `geofences` | `GET", "| `geofences` | `POST", 1))
    stale = [f"{table_docs.RAW_TABLES_PAGE}: raw-tables"]
    assert table_docs.stale(root=tmp_path) == stale
    assert table_docs.write(table_docs.DECLARED, root=tmp_path) == stale
    assert table_docs.stale(root=tmp_path) == []


def test_every_table_declares_what_the_documents_say_of_it() -> None:
    """How it is kept up to date, the envelope of its route and what that route's shape rests on;
    every raw table the reference lists is declared, or is Data Tap's or the pipeline's own."""
    for table in TABLES.values():
        assert table.doc.kept, f"{table.name}: Doc(kept=...) says how the table is kept up to date"
        assert table_docs.evidence(table), f"{table.name}: no live, spec or declared evidence"
    for path, tables in table_docs.routes_of(TABLES.values()).items():
        assert any(t.doc.envelope for t in tables), f"{path}: no table declares its envelope"
    rows = _markdown_rows(_section(ROOT / table_docs.RAW_TABLES_PAGE, "# Raw tables"))
    others = {"data_tap__<name>", *bookkeeping.ADDED, "_esper_runs", "_esper_rejected"}
    assert set(rows) == set(TABLES) | others, (
        "the raw tables reference differs from the declarations"
    )


# docs/spec/README.md's envelope words -> the family `shapes.families` reads off an answer
ENVELOPE_FAMILY = {
    "v2-list": "content-list",
    "cc-list": "content-list",
    "content-list": "content-list",
    "legacy-list": "legacy-list",
    "bare object": "bare-object",
}


def test_a_declared_envelope_is_the_family_its_reference_records() -> None:
    """Where live-shapes.json or the subset has the route, the envelope a `Doc` names is of the
    family recorded there (what `doctor` holds a real tenant's answer to)."""
    checked = 0
    for path, tables in table_docs.routes_of(TABLES.values()).items():
        recorded = families(reference("GET", path).root)
        if not recorded:
            continue
        envelope = next(t.doc.envelope for t in tables if t.doc.envelope)
        words = next((w for w in ENVELOPE_FAMILY if envelope.startswith(w)), None)
        assert words is not None, f"{path}: envelope {envelope!r} names no known family"
        assert ENVELOPE_FAMILY[words] in recorded, (path, envelope, recorded)
        checked += 1
    assert checked >= 15


def test_every_raw_table_has_its_staging_view() -> None:
    """`sql/staging/stg_esper__<table>.sql` for every declared table, and `stg_esper__runs` for
    the run bookkeeping (the reconciliation is read by `status` as it is)."""
    staging = ROOT / "sql" / "staging"
    wanted = [*TABLES, "runs"]
    missing = [
        f"sql/staging/stg_esper__{t}.sql"
        for t in wanted
        if not (staging / f"stg_esper__{t}.sql").exists()
    ]
    assert missing == [], f"no staging view: {missing} (docs/recipes/add-a-resource.md)"


def test_the_contract_lists_the_run_bookkeeping_columns_whole() -> None:
    """docs/contracts.md section 3 names every `_esper_runs`, `_esper_reconciliation` and
    `_esper_rejected` column, in `bookkeeping.py`'s order."""
    text = _section(ROOT / "docs" / "contracts.md", "## 3. Raw warehouse tables")
    for table, columns in (
        ("_esper_runs", bookkeeping.RUNS),
        ("_esper_reconciliation", bookkeeping.RECONCILIATION),
        ("_esper_rejected", bookkeeping.REJECTED),
    ):
        listed = text.split(f"- `{table}`: `", 1)[1].split("`", 1)[0]
        while re.search(r"\([^()]*\)", listed):  # the meanings in parentheses, nested too
            listed = re.sub(r"\s*\([^()]*\)", "", listed)
        assert [c.strip() for c in listed.split(",")] == list(columns), table


@pytest.mark.parametrize("full_scan", [False, True], ids=["nightly", "first load"])
def test_the_source_starts_every_table_after_what_its_declaration_says_it_follows(
    monkeypatch: pytest.MonkeyPatch, full_scan: bool
) -> None:
    """The order dlt starts the source's resources in (`fifo`) against the declarations it is
    derived from (`tables.extraction_order`): the devices walk (`devices` and its pipes) first,
    every table after the tables it is read from (parent, needs, companion), off the walk after
    what it declares it follows (`Table.after`), and device events after the whole tail when
    they read the activity it saw (a nightly run; a first load reads them per device page)."""
    hints = _hints(_source(monkeypatch, full_scan=full_scan))
    order = list(hints)
    assert set(order) == set(TABLES) - ({"device_census"} if not full_scan else set())
    walk = {"devices"} | {
        t
        for t, (resource, _) in hints.items()
        if resource.is_transformer and "devices" in read_from(TABLES[t])
    }
    assert ("device_events" in walk) is full_scan
    assert order[: len(walk)] == [t for t in order if t in walk]  # the walk first
    assert order[0] == "devices"
    for table in order:
        declared = TABLES[table]
        earlier = read_from(declared) | (set() if table in walk else set(declared.after))
        for name in earlier:
            assert order.index(name) < order.index(table), (name, table, order)
    if full_scan:
        assert order.index("device_census") == len(walk)  # after every pipe of `devices`
    else:  # the feeds of the devices with activity: once the whole tail has ended
        assert "command_statuses" in TABLES["device_events"].after  # (a table of the tail)
        assert order[-1] == "device_events"
