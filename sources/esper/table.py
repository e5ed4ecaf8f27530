"""`Table`: everything about one raw table, declared once, beside the resource that loads it.

A declaration says where the table comes from (route, page size), how rows are identified and
kept up to date (key, cursor, write disposition), which table it comes with, its declared
columns, how `doctor` probes it, and what the documents say of it (`Doc`). Everything else is
derived from it: the resource's dlt hints (`Table.hints`; a list read whole each run gets its
resource too: `whole_list`), the Arrow pages (`Table.page`), the
empty raw tables the SQL build starts from (`pipelines/build/raw_contract.py`), Dagster's raw assets,
`doctor`'s probes of plain lists, `run --resources` companions, and the rows of
docs/reference/raw-tables.md and docs/spec/README.md's route table (`pipelines/tools/table_docs.py` writes them).

Example (a list read whole each run: its resource is made from the declaration):
    >>> GEOFENCES = Table("geofences", "/v0/enterprise/{eid}/geofence/", ("id",),
    ...                   disposition="replace", columns=(*cols("id name"), Col("radius", INT)),
    ...                   whole_list="own")
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

import dlt
import pyarrow as pa

from .arrow import ROW_VERSION, Col, Unreadable, cols, flat, to_arrow, unreadable_key
from .http.paginators import LinkPaginator, Paginator
from .times import NotATime, parse_time

if TYPE_CHECKING:
    from .http import EsperClient

__all__ = [
    "BOOL", "INT", "JSON", "TS", "Col", "Disposition", "Doc", "Evidence", "Table", "WholeList",
    "cols", "flat",
]  # fmt: skip

TS, INT, BOOL, JSON = "timestamp", "bigint", "bool", "json"

# `/v2/devices/` allows 1000 items per page (the spec's maximum; 142,632 devices walked at 1000
# in the live smoke test). Every other list is read 250 at a time: the page size Esper's own
# support tool settled on after trying 1000 (live-shapes.json `client_practice.page_size`).
MAX_PAGE_SIZE = 1000
PAGE_SIZE = 250

# How dlt writes a table:
# - merge: on its key (dlt's default merge; a first load appends: `dispositions.append_on_first_load`).
# - insert-only: merged by inserting the keys not yet stored, never rewriting a row (immutable
#   records); where a destination lacks it, dlt's default merge (`dispositions.merge_where_needed`).
# - replace: the whole table each run.
# - scd2: dlt's history of versions, validity at the run's API time (`__init__.py` sets it); rows
#   of a merge key absent from a new read are retired; `key` is unique among the current rows.
Disposition = Literal["merge", "insert-only", "replace", "scd2"]

# A tenant-level list read whole each run, whose resource is made from its declaration
# (`tables.LISTS`, through `catalogues.list_resource`):
# - own: read for this table alone; a 403/404 skips it for the run (`optional_whole_list`).
# - shared: read once per run and shared with the tables read from it (`optional_shared_list`);
#   a 403/404 skips them all.
# - core: a list every tenant has (groups): a refusal is the run's (`whole_list`).
WholeList = Literal["own", "shared", "core"]


class PageLedger(Protocol):
    """What a table's pages use of the run's ledger (`run.ledger.RunLedger`)."""

    unreadable: Unreadable

    def set_aside(
        self, table: str, column: str, route: str | None, items: list[Any], *, kept: bool
    ) -> None: ...

    def has_set_aside(self, table: str) -> bool: ...

    def keep(self, table: str, text: str) -> None: ...


def keep_what_was_loaded() -> None:
    """Let the table of the resource running now keep its rows although it yields nothing.

    dlt truncates the table of a `replace` resource that yielded no data at the end of the
    extract; a table skipped in this run (refused route, Data Tap quota, a record set aside)
    must instead keep what earlier runs loaded. An empty `append` changes nothing, and the next
    run's resource is `replace` again.
    """
    try:
        resource = dlt.current.resource()
    except Exception:  # not inside a pipeline's extract (a resource iterated by hand)
        return
    if resource.write_disposition == "replace":
        resource.apply_hints(write_disposition="append")


def _absent(item: dict, path: tuple[str, ...]) -> bool:
    """Whether `item` has no value at `path` (absent, null or empty); a path running into a
    value that is not an object has one, which its page names as unreadable."""
    value: Any = item
    for part in path:
        if value is None:
            return True
        if not isinstance(value, Mapping):
            return False
        value = value.get(part)
    return value is None or value == ""


@dataclass(frozen=True)
class Evidence:
    """Where the shape of a route that no live recording and no OpenAPI subset holds is written,
    in a form a test checks (tests/simulator/test_conformance.py): a file of docs/spec/ that
    documents the route's GET, transcribed from `source`. Such a route's shape is an assumption
    resting on that file, never on nothing.

    Attributes:
        file: the file in docs/spec/: an OpenAPI file (`esper-pipelines-v0-subset.json`: its
            `paths` hold the route, and the simulator's answer is validated against it) or notes
            transcribed from Esper's OpenAPI files (`openapi-notes-credentials-access.md`: a
            `### GET <route>` heading).
        source: the file of Esper's own the facts come from (`esper-cli authz2.yaml`).
    """

    file: str
    source: str

    def __str__(self) -> str:
        return f"spec ({self.source})"


@dataclass(frozen=True)
class Doc:
    """What the documents say of a table beyond its route and key, written once here:
    `python -m esper_warehouse.pipelines.tools.table_docs` writes the table's row in docs/reference/raw-tables.md and the
    route's row in docs/spec/README.md from it (a test fails when they differ).

    Attributes:
        read: how the route is read, shown after `GET <path>` (pages, parameters, per parent).
        columns: what the columns an analyst needs mean.
        kept: how the table is kept up to date (and what a refused route does to it).
        envelope: the route's answer, in docs/spec/README.md's words (`legacy-list`, `v2-list`,
            `cc-list`, `content-list (previous)`, `bare object`) and what it holds that a reader
            of the wire must know. Tables sharing a route: the first one declared says it.
        evidence: what the route's shape rests on beyond live-shapes.json and the OpenAPI
            subset: for a route neither holds, an `Evidence` (checked); else words (`docs
            (...)`). `live <n>` is read from the former, and `spec` from the latter when
            nothing else is said.
    """

    read: str = ""
    columns: str = ""
    kept: str = ""
    envelope: str = ""
    evidence: str | Evidence = ""


@dataclass(frozen=True)
class Table:
    """One raw table.

    Attributes:
        name: the raw table (and resource) name.
        path: the route; `{eid}` = enterprise id, `{id}` = parent id.
        key: the columns that identify a row (the dlt primary key, except for scd2 tables,
            whose rows are versions); empty: none (a replaced snapshot).
        cursor: the record field whose newest value read is the table's watermark; None: the
            table is read whole, or per parent, or rides on another table's scan.
        disposition: how dlt writes the table (see `Disposition`).
        merge_key: scd2 only: the column whose rows one read replaces as a whole.
        loaded_with: the table whose selection (`run --resources <it>`) loads this one too.
        needs: the tables whose resources give this one the ids it reads, in the same run; a
            selection of this table loads them too, since alone it would have no ids to read.
            A companion (`loaded_with`) selected alone brings its parent the same way.
        page_size: the most items one page may hold.
        paginator: how the route pages, in the shape of dlt's paginators
            (sources/esper/http/paginators.py): `LinkPaginator` (``limit``/``offset``, then
            `next` links: most lists), `CursorPaginator` (``/v2/devices/``), `OffsetPaginator`
            (a count without links), `SinglePage` (the whole list in one answer). Every walk of
            the route uses it.
        columns: the declared columns (names are the API's own; docs/contracts.md section 3).
            Fields not declared are still loaded, typed from their values; declaring a field
            fixes its type, so a page where it is missing or null cannot change the table.
        keep_extra: load undeclared fields too (False: only the declared columns).
        probe: whether one plain page of the route can be asked for (`limit`, `offset`): then
            `doctor` and the simulator's conformance test derive their check of the table from
            this declaration. Default: when `path` names no `{id}`. False: the route needs
            parameters (a time window, request ids); `doctor` probes it by hand.
        after: tables whose resources must have run before this one's on a nightly run (the
            extraction order is derived from it, `parent`, `needs` and `loaded_with`:
            `tables.extraction_order`).
        parent: a per-parent list (`{id}` in `path`): the table whose items fill `{id}`, with
            their field `parent_key`. `doctor` and the conformance test probe it with the first
            item of the parent's list.
        prefer_copy: for a whole list that serves one key more than once (`pages.read_all`),
            `prefer_copy(kept, other)` is the copy kept; None keeps the last one read.
        doc: what docs/reference/raw-tables.md and docs/spec/README.md say of the table (`Doc`).
        family: the family whose freshness the table shares (`tables.FAMILY_LABELS`: a line of
            `status`'s freshness block, the inputs of a mart's clock); None: its module's name.
        whole_list: how a tenant-level list read whole each run is read (`WholeList`): its
            resource is then made from this declaration, none is written by hand; None: its
            module writes the resource.
    """

    name: str
    path: str
    key: tuple[str, ...]
    cursor: str | None = None
    disposition: Disposition = "merge"
    merge_key: str | None = None
    loaded_with: str | None = None
    needs: tuple[str, ...] = ()
    page_size: int = PAGE_SIZE
    paginator: type[Paginator] = field(default=LinkPaginator, compare=False)
    columns: tuple[Col, ...] = ()
    keep_extra: bool = True
    extra: dict[str, str] = field(default_factory=dict, hash=False)
    probe: bool | None = None
    after: tuple[str, ...] = ()
    parent: str | None = None
    parent_key: str = "id"
    prefer_copy: Callable[[dict, dict], dict] | None = field(default=None, compare=False)
    doc: Doc = field(default=Doc(), compare=False)
    family: str | None = None
    whole_list: WholeList | None = None

    @property
    def probed_as_list(self) -> bool:
        """`doctor` derives this table's probe: one page of a tenant-level list."""
        return self.probe if self.probe is not None else "{id}" not in self.path

    @property
    def identifying(self) -> frozenset[str]:
        """The columns a row cannot be loaded without (key, cursor, scd2 merge key): a record
        without a value in one of them is set aside (`keyed`); a value that cannot be read ends
        the run naming `table.column` (exit 3); any other reads as NULL, counted."""
        return frozenset((*self.key, *filter(None, (self.cursor, self.merge_key))))

    def require(
        self,
        items: list[dict],
        ledger: PageLedger,
        fields: tuple[str, ...] | None = None,
        route: str | None = None,
    ) -> list[dict]:
        """`items` that have a value in `fields` (default: the key, as the API serves it); the
        others are set aside under this table (`keyed`).

        Called where a read uses an item's key before its page is converted (a parent's ids,
        a walk's seen keys), so that an item without it is set aside as its page would set it
        aside, never read as a bare `KeyError` or a route naming `None`.
        """
        return self.keyed(items, ledger, fields if fields is not None else self.key, route)

    def keyed(
        self,
        items: list[dict],
        ledger: PageLedger,
        fields: Iterable[str] | None = None,
        route: str | None = None,
    ) -> list[dict]:
        """`items` that have a value in each of `fields` (default: `identifying`); each other
        is set aside (`RunLedger.set_aside`) naming `table.column` and `route` (default: the
        table's): never loaded, keyed `(None,)` or merged with another.

        A whole list (`replace`) is then kept as loaded for the run (`page`). A part of an
        scd2 table (one merge key's rows: a device's complete app list) leaves out all its rows:
        loaded without one, the rows of the record set aside would be retired.
        """
        names = sorted(self.identifying) if fields is None else list(fields)
        paths = {c.name: c.source for c in self.columns}
        good: list[dict] = []
        bad: dict[str, list[dict]] = {}
        for item in items:
            missing = next((n for n in names if _absent(item, paths.get(n, (n,)))), None)
            if missing is None:
                good.append(item)
            else:
                bad.setdefault(missing, []).append(item)
        if not bad:
            return items
        for column, records in bad.items():
            ledger.set_aside(
                self.name, column, route or self.path, records, kept=self.disposition == "replace"
            )
        if self.disposition == "scd2" and self.merge_key:
            parts = {item.get(self.merge_key) for records in bad.values() for item in records}
            good = [item for item in good if item.get(self.merge_key) not in parts]
        return good

    @property
    def cursor_field(self) -> str:
        """The record field the table's watermark follows."""
        if self.cursor is None:
            raise ValueError(f"{self.name} declares no cursor")
        return self.cursor

    def cursor_time(self, item: Mapping[str, Any]) -> datetime | None:
        """An item's cursor value as a time (None when absent).

        Raises:
            UnreadableKey: the value is not a time; the error names the table's cursor.
        """
        try:
            return parse_time(item.get(self.cursor_field))
        except NotATime as error:
            column = f"{self.name}.{self.cursor_field}"
            raise unreadable_key(column, error.value, "timestamp", error.reason) from None

    def hints(self) -> dict[str, Any]:
        """The dlt hints, all from the declaration: `@dlt.resource(**TABLE.hints())`.

        An scd2 table gets no primary key (its rows are versions) but its merge key and its row
        version column, which `page(..., row_hash=True)` fills; its validity boundary (the run's
        API time) is added per run in `__init__.py`.
        """
        hints: dict[str, Any] = {"name": self.name, "columns": self.dlt_columns()}
        if self.disposition == "scd2":
            hints["merge_key"] = self.merge_key
            hints["write_disposition"] = {
                "disposition": "merge",
                "strategy": "scd2",
                "row_version_column_name": ROW_VERSION,
            }
            return hints
        if self.key:
            hints["primary_key"] = self.key
        if self.disposition == "insert-only":
            hints["write_disposition"] = {"disposition": "merge", "strategy": "insert-only"}
        else:
            hints["write_disposition"] = self.disposition
        return hints

    def dlt_columns(self) -> dict[str, dict[str, Any]]:
        """Column hints for dlt (JSON columns are text in Arrow, `json` in dlt)."""
        return {c.name: {"data_type": c.type, "nullable": True} for c in self.columns}

    def path_for(self, client: EsperClient, parent: str | None = None) -> str:
        """The route with the tenant's enterprise id and, for a per-parent list, the parent."""
        return self.path.format(eid=client.enterprise_id, id=parent)

    def limit(self, page_size: int | None) -> int:
        """Items per page: the run's `page_size` setting, never more than the route allows."""
        return min(page_size or self.page_size, self.page_size)

    def page(self, items: list[dict], ledger: PageLedger, **kwargs: Any) -> pa.Table:
        """One page of records as an Arrow table with this table's declared columns; values that
        cannot be read are NULL, counted in the run's `unreadable` (`RunLedger.unreadable`).

        A record without a value in an identifying column is set aside (`keyed`; columns the
        loader fills, `add`, excepted). A whole list (`replace`) a record of which, or of a
        table it is read from, was set aside is kept as loaded: the page is empty, and dlt keeps
        the table (`keep_what_was_loaded`), as it is never replaced by a list lacking one.
        """
        filled = set(kwargs.get("add") or ())
        items = self.keyed(items, ledger, [n for n in sorted(self.identifying) if n not in filled])
        if self.disposition == "replace" and ledger.has_set_aside(self.name):
            ledger.keep(
                self.name,
                "kept as loaded, as a record of its list, or of a list it is read from, was set "
                "aside",
            )
            keep_what_was_loaded()
            items = []
        return to_arrow(items, self, unreadable=ledger.unreadable, **kwargs)
