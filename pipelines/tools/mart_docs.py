"""The marts described once: sql/marts/_marts.yml, in dbt's properties format (version 2).

Each model has a `description`, `meta.grain` (one row per what) and `meta.answers` (what it is
for, in a sentence), and each column a `description` and, where they hold, `tests:`:
`not_null`, `unique`, and `accepted_values` (`{accepted_values: {values: [...]}}`), as dbt
writes them. From it:

* `reference` writes docs/reference/marts.md's generated section (`table_docs` keeps it
  current, with the raw tables' sections);
* `checks` gives, per test, a query counting the rows that break it; tests/sql/test_mart_docs.py
  runs them on a built warehouse, and checks that every column of every built mart is
  documented exactly once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..build.model_files import SQL_DIR

MARTS_YML = SQL_DIR / "marts" / "_marts.yml"
TEST_NAMES = ("not_null", "unique", "accepted_values")


@dataclass(frozen=True)
class Column:
    """One column of a mart, as documented."""

    name: str
    description: str
    tests: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Mart:
    """One mart, as documented: what it is, one row per what, what it answers, its columns."""

    name: str
    description: str
    grain: str
    answers: str
    columns: tuple[Column, ...]


def load(path: Path = MARTS_YML) -> dict[str, Mart]:
    """Mart name -> `Mart`, in the file's order.

    Raises:
        ValueError: a model or column without a description, or a test this module does not run.
    """
    document = yaml.safe_load(path.read_text())
    marts: dict[str, Mart] = {}
    for model in document["models"]:
        columns = []
        for column in model.get("columns", []):
            tests = tuple(column.get("tests", ()))
            for test in tests:
                if _test_name(test) not in TEST_NAMES:
                    raise ValueError(f"{model['name']}.{column['name']}: unknown test {test!r}")
            if not column.get("description"):
                raise ValueError(f"{model['name']}.{column['name']}: no description")
            columns.append(Column(column["name"], column["description"].strip(), tests))
        if not model.get("description"):
            raise ValueError(f"{model['name']}: no description")
        meta = model.get("meta", {})
        marts[model["name"]] = Mart(
            name=model["name"],
            description=model["description"].strip(),
            grain=str(meta.get("grain", "")).strip(),
            answers=str(meta.get("answers", "")).strip(),
            columns=tuple(columns),
        )
    return marts


def _test_name(test: Any) -> str:
    """`not_null` for `not_null`, `accepted_values` for `{accepted_values: {...}}`."""
    return test if isinstance(test, str) else next(iter(test))


def _quoted(value: Any) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def checks(marts: Mapping[str, Mart] | None = None) -> list[tuple[str, str]]:
    """(`mart.column: test`, a query whose single value counts the rows that break it)."""
    queries = []
    for mart in (marts if marts is not None else load()).values():
        relation = f"marts.{mart.name}"
        for column in mart.columns:
            name = f'"{column.name}"'
            for test in column.tests:
                kind = _test_name(test)
                if kind == "not_null":
                    sql = f"select count(*) from {relation} where {name} is null"
                elif kind == "unique":
                    sql = (
                        f"select count(*) from (select {name} from {relation} "
                        f"where {name} is not null group by all having count(*) > 1)"
                    )
                else:
                    values = ", ".join(_quoted(v) for v in test[kind]["values"])
                    sql = f"select count(*) from {relation} where {name}::varchar not in ({values})"
                queries.append((f"{mart.name}.{column.name}: {kind}", sql))
    return queries


# A link in the YAML names a path from the repository's root; the page is two folders down.
REPO_LINK = re.compile(r"\]\((?![a-z]+:|#|\.\./)([^)]+)\)")


def _from_page(text: str) -> str:
    return REPO_LINK.sub(r"](../../\1)", text)


def _cell(text: str) -> str:
    """A markdown table cell: one line, a `|` escaped, links from the page."""
    return _from_page(" ".join(text.split()).replace("|", "\\|"))


def _test_words(tests: Iterable[Any]) -> str:
    words = []
    for test in tests:
        kind = _test_name(test)
        if kind == "accepted_values":
            values = ", ".join(f"`{v}`" for v in test[kind]["values"])
            words.append(f"one of {values}")
        else:
            words.append(kind.replace("_", " "))
    return "; ".join(words)


def reference(marts: Mapping[str, Mart] | None = None) -> str:
    """docs/reference/marts.md: a table of the marts, then each mart's columns."""
    marts = marts if marts is not None else load()
    out = ["| mart | one row per | answers |", "|---|---|---|"]
    out += [
        f"| [`{m.name}`](#{m.name}) | {_cell(m.grain)} | {_cell(m.answers)} |"
        for m in marts.values()
    ]
    for mart in marts.values():
        out += ["", f"## {mart.name}", ""]
        out.append(_from_page("\n\n".join(p.strip() for p in mart.description.split("\n\n"))))
        out += ["", f"SQL: [sql/marts/{mart.name}.sql](../../sql/marts/{mart.name}.sql)", ""]
        out += ["| column | description | tests |", "|---|---|---|"]
        out += [
            f"| `{c.name}` | {_cell(c.description)} | {_test_words(c.tests)} |"
            for c in mart.columns
        ]
    return "\n".join(out)
