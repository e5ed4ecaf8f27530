"""Fixture warehouses for the SQL model tests, built once per test session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from pipelines.models import build_models
from tests.sql import scenarios
from tests.sql.rawdata import make_warehouse


def _built(tmp_path_factory: pytest.TempPathFactory, name: str, data: dict, **opts) -> Path:
    path = make_warehouse(tmp_path_factory.mktemp(name) / "esper.duckdb", data, **opts)
    build_models(path)
    return path


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


def query_fn(path: Path) -> Query:
    def query(sql: str, params: list | None = None) -> list[dict]:
        con = duckdb.connect(str(path), read_only=True)
        try:
            cursor = con.execute(sql, params or [])
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            con.close()

    return query
