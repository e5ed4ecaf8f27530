"""A declared table's route as the tests name it: a simulator fault's glob, a request's path.

The route is the table's declaration's (`Table.path`), written there once: a test that serves a
fault on it, or asks for it, reads it from there (tests/test_facts_once.py holds the whole
lists to it).
"""

from __future__ import annotations

from esper_warehouse.sources.esper.table import Table


def glob(table: Table, parent: object = "*", eid: str = "*") -> str:
    """`table`'s route for a simulator fault (`route` globs: `*` for any enterprise or parent)."""
    return table.path.format(eid=eid, id=parent)
