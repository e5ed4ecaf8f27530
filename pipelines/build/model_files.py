"""The SQL files of the models: where they are, what one holds, the order a layer builds in.

`sql/<layer>/<name>.sql` holds one `select` and becomes `<layer>.<name>` (pipelines/build/models.py
builds them; pipelines/build/datatests.py tests them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from esper_warehouse import data_path

SQL_DIR = data_path("sql")
LAYERS = ("staging", "intermediate", "marts")
TABLE_SWITCH = re.compile(r"^\s*--\s*materialized:\s*table\s*$", re.MULTILINE | re.IGNORECASE)
MACRO = re.compile(r"^create or replace macro (\w+)\(", re.MULTILINE | re.IGNORECASE)


class ModelError(RuntimeError):
    """A model (or seed, macro, raw placeholder) failed: the message names the file."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class SeedsMissing(ModelError):
    """The configured folder of compliance targets does not exist."""


@dataclass(frozen=True)
class Model:
    layer: str
    name: str
    path: Path
    sql: str

    @property
    def relation(self) -> str:
        return f"{self.layer}.{self.name}"

    @property
    def is_table(self) -> bool:
        return bool(TABLE_SWITCH.search(self.sql))


def statements(text: str) -> list[str]:
    """Split a file of DDL statements on `;` at line ends (the files hold no such literals)."""
    parts = re.split(r";\s*(?:--[^\n]*)?\n", text + "\n")
    out = []
    for part in parts:
        code = "\n".join(line for line in part.splitlines() if not line.strip().startswith("--"))
        if code.strip():
            out.append(part.strip().rstrip(";"))
    return out


def macro_names(sql_dir: Path = SQL_DIR) -> set[str]:
    """The macros the build creates (`sql/macros/*.sql`): a warehouse without one of them was
    modelled by an earlier release (its marts may lack columns too)."""
    return {
        name
        for path in sorted((sql_dir / "macros").glob("*.sql"))
        for name in MACRO.findall(path.read_text())
    }


def load_models(sql_dir: Path, layer: str) -> list[Model]:
    """The models of one layer, in build order (a model after the same-layer models it names)."""
    models = {
        path.stem: Model(layer, path.stem, path, path.read_text())
        for path in sorted((sql_dir / layer).glob("*.sql"))
    }
    deps = {
        name: {
            other
            for other in models
            if other != name and re.search(rf"\b{layer}\.{other}\b", _without_comments(model.sql))
        }
        for name, model in models.items()
    }
    ordered: list[Model] = []
    done: set[str] = set()
    while len(done) < len(models):
        ready = sorted(name for name in models if name not in done and deps[name] <= done)
        if not ready:
            stuck = sorted(set(models) - done)
            raise ModelError(sql_dir / layer, f"circular references between {stuck}")
        for name in ready:
            ordered.append(models[name])
            done.add(name)
    return ordered


def _without_comments(sql: str) -> str:
    """The SQL without its `--` comments (a comment naming a model is no reference to it)."""
    return re.sub(r"--[^\n]*", "", sql)
