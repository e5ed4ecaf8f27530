"""The user documents: README.md and the pages under docs/ that a reader follows (the guide, the
reference, troubleshooting, the simulator, development, the recipes, the contracts).

docs/decisions.md is history (it may name what is gone) and docs/spec/ records the API; neither
holds instructions to run, so neither is a page here.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_PAGES = ("docs/decisions.md", "docs/spec/")


def pages() -> list[str]:
    """README.md, then every page under docs/, as paths from the repository's root."""
    found = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))
    return ["README.md", *(p for p in found if not p.startswith(NOT_PAGES))]


def page(name: str) -> str:
    """The text of one page (`docs/guide/warehouse.md`)."""
    return (ROOT / name).read_text()


def every_page() -> str:
    """Every page's text, README first, one after another."""
    return "\n\n".join(page(name) for name in pages())
