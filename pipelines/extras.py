"""The optional parts of the installed tool: what an extra holds, and how to install it.

`report` (and the notebooks the demo points at) need the `notebooks` extra of pyproject.toml
(marimo, altair, vl-convert). Its list is read from the installed package's own metadata, so
pyproject.toml stays its one home; a checkout's `make install` installs every extra.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import esper_warehouse

DISTRIBUTION = "esper-warehouse"
REPORT_EXTRA = "notebooks"  # pyproject.toml [project.optional-dependencies]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def extra_requirements(extra: str = REPORT_EXTRA) -> list[str]:
    """The distributions `extra` installs, as the installed metadata lists them (empty when the
    package is not installed, e.g. imported from a bare checkout)."""
    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    names = (_NAME.match(r) for r in requires if marker.search(r.partition(";")[2]))
    return [name.group(0) for name in names if name]


def missing(extra: str = REPORT_EXTRA) -> list[str]:
    """The distributions of `extra` this installation lacks."""
    lacking = []
    for name in extra_requirements(extra):
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            lacking.append(name)
    return lacking


def install_hint(extra: str = REPORT_EXTRA) -> str:
    """The command that installs `extra`: in a checkout `make install`; else the tool again from
    its wheel, with the extra (README "Quick start")."""
    if not (Path(esper_warehouse.__file__).parent / "pipelines").is_dir():  # a checkout
        return "make install"
    wheel = f"esper_warehouse-{metadata.version(DISTRIBUTION)}-py3-none-any.whl"
    return (
        f"uv tool install --force 'dist/{wheel}[{extra}]' "
        f"(or: pipx install --force 'dist/{wheel}[{extra}]'; the wheel `uv build --wheel` writes)"
    )


def needs(what: str, extra: str = REPORT_EXTRA) -> str | None:
    """Why `what` cannot run here (the extra's distributions this installation lacks, and the
    command that installs them), or None when it can."""
    lacking = missing(extra)
    if not lacking:
        return None
    return (
        f"{what} needs the `{extra}` extra, which this installation lacks (modules not "
        f"installed: {', '.join(lacking)}); install it with: {install_hint(extra)}"
    )
