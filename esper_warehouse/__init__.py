"""esper-warehouse: load an Esper tenant into DuckDB every night (README.md).

The one import name the tool claims. Its parts keep the layout of dlt projects in the
repository (``sources/esper``, ``pipelines``, ``simulator``, ``sql``, ``notebooks``) and are
imported as ``esper_warehouse.sources.esper``, ``esper_warehouse.pipelines`` and
``esper_warehouse.simulator``:

- installed (wheel, ``pipx``, ``uv tool install``): they sit inside this package, so a user's
  own ``sources/`` or ``pipelines/`` folder never shadows them (docs/decisions.md);
- in a checkout: this folder holds only this file and the parts sit beside it, so the
  package's search path is extended by the checkout's root.

Files the code reads (SQL models, vocabularies, the recorded live shapes, notebooks) are found
with :func:`data_path`, the same way in both.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
if not (_HERE / "pipelines").is_dir():  # a checkout: the parts are the repository's folders
    __path__.append(str(_HERE.parent))


def data_path(*parts: str) -> Path:
    """Where a shipped file or folder is, e.g. ``data_path("sql", "vocabulary")``.

    Raises:
        FileNotFoundError: the installation lacks it (a broken wheel: say which file).
    """
    for base in __path__:
        candidate = Path(base).joinpath(*parts)
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"esper-warehouse is installed without {'/'.join(parts)}")
