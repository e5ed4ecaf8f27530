"""Fixture warehouses for the SQL model tests, built once per test run."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import SEEDS_ENV, build_models

from tests.conftest import built_once
from tests.sql import scenarios
from tests.sql.rawdata import make_warehouse

# The fixture answers were written against these targets, not against the shipped sql/seeds/,
# which an admin (or the demo) is free to change.
TEST_SEEDS = Path(__file__).resolve().parent / "seeds"


@pytest.fixture(scope="package", autouse=True)
def test_targets() -> Iterator[Path]:
    """Every build in tests/sql uses the test targets unless it passes `seeds=` itself."""
    previous = os.environ.get(SEEDS_ENV)
    os.environ[SEEDS_ENV] = str(TEST_SEEDS)
    yield TEST_SEEDS
    if previous is None:
        os.environ.pop(SEEDS_ENV, None)
    else:
        os.environ[SEEDS_ENV] = previous


def _built(tmp_path_factory: pytest.TempPathFactory, name: str, data: dict, **opts) -> Path:
    """The scenario's warehouse with the models built, once per test run (`built_once`: several
    files read it, whichever worker runs them); read-only, a test that writes copies it."""

    def build(folder: Path) -> None:
        path = make_warehouse(folder / "esper.duckdb", data, **opts)
        # Explicit: a session fixture is set up before the package-scoped `test_targets` above,
        # so when a worker's first file here asks for one, the environment is not yet set.
        build_models(path, seeds=TEST_SEEDS)

    folder, _ = built_once(tmp_path_factory, f"sql-{name}", build)
    return folder / "esper.duckdb"


@pytest.fixture(scope="session")
def compliance_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(tmp_path_factory, "compliance", scenarios.compliance())


@pytest.fixture(scope="session")
def rollout_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(tmp_path_factory, "rollout", scenarios.rollout())


@pytest.fixture(scope="session")
def commands_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(tmp_path_factory, "commands", scenarios.commands())


Query = Callable[..., list[dict]]


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def query_fn(path: Path) -> Query:
    """Run a query on the warehouse file, through a read-only connection of its own."""

    def query(sql: str, params: list | None = None) -> list[dict]:
        con = duckdb.connect(str(path), read_only=True)
        try:
            return _dicts(con.execute(sql, params or []))
        finally:
            con.close()

    return query


@contextmanager
def querying(path: Path) -> Iterator[Query]:
    """`query_fn` on one read-only connection kept open for many queries (a connection costs
    ~25 ms to open); nothing may write the file meanwhile."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        yield lambda sql, params=None: _dicts(con.execute(sql, params or []))
    finally:
        con.close()
