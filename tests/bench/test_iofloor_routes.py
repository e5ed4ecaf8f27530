"""The I/O floor reads every route the source declares, derived from the declarations.

The per-route check of `python -m bench` compares the floor's requests with the pipeline's on a
simulator; this holds, without one, that the floor's plan is the declarations' (`bench/iofloor.py`
`ROUTES`): a table added to `tables.TABLES` is read by the floor, and a declaration the floor
cannot read fails loudly instead of being left out.
"""

from __future__ import annotations

import pytest
from esper_warehouse.sources.esper.table import Table
from esper_warehouse.sources.esper.tables import TABLES

from bench.iofloor import ROUTES, Routes


def test_the_floor_reads_every_declared_route() -> None:
    declared = {table.path for table in TABLES.values()}
    assert declared - ROUTES.paths() == set()


def test_a_new_declared_route_is_read_by_the_floor() -> None:
    added = Table("widgets", "/v0/enterprise/{eid}/widget/", ("id",))
    child = Table("widget_parts", "/v0/widget/{id}/parts/", ("id",), parent="widgets")
    routes = Routes.of([*TABLES.values(), added, child])
    assert added in routes.lists
    assert routes.children["widgets"] == (child,)


def test_a_route_the_floor_cannot_plan_fails_loudly() -> None:
    orphan = Table("orphans", "/v0/orphan/{id}/", ("id",))
    with pytest.raises(ValueError, match="no parent"):
        Routes.of([orphan])
    windowed = Table("windowed", "/v0/window/", ("id",), probe=False)
    with pytest.raises(ValueError, match="parameters"):
        Routes.of([windowed])
