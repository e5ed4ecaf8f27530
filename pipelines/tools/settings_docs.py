"""The settings reference's table of the source's settings and `.dlt/config.toml`'s
`[sources.esper]` block, written from their one declaration (`EsperSourceConfiguration`,
sources/esper/settings.py).

`python -m esper_warehouse.pipelines.tools.settings_docs` rewrites the section of
docs/reference/settings.md between `<!-- generated: source-settings -->` and
`<!-- end: source-settings -->` (the rest of the page, the run's own settings and dlt's, is
written by hand) and the block of .dlt/config.toml between `# generated: source-settings` and
`# end: source-settings`; `--check` writes nothing and exits 1 naming the stale files.
tests/source/test_settings.py fails when either differs from the declaration.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from esper_warehouse.sources.esper.settings import SETTINGS, Setting

from ..exit_codes import Exit

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "python -m esper_warehouse.pipelines.tools.settings_docs"
PAGE = "docs/reference/settings.md"
CONFIG = ".dlt/config.toml"
BEGIN, END = "# generated: source-settings", "# end: source-settings"
PAGE_BEGIN, PAGE_END = "<!-- generated: source-settings", "<!-- end: source-settings -->"


def shown_default(spec: Setting) -> str:
    """A setting's default as the page shows it."""
    value = spec.default
    if spec.required:
        return "— (required, secret)" if spec.secret else "— (required)"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return f"`{','.join(format(v, 'g') for v in value)}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`"
    return f"`{format(value, 'g')}`"


def page_section() -> str:
    """docs/reference/settings.md's table of the source's settings, and how to add one."""
    lines = [
        f"{PAGE_BEGIN} ({COMMAND}; edit sources/esper/settings.py) -->",
        "",
        "Every value is checked before the first request against the type and range below (by",
        "dlt's own resolution: `EsperSourceConfiguration.on_resolved`); a value outside is exit 2",
        "naming the setting, its variable and what it accepts (`doctor` checks them too).",
        "",
        "| setting | environment variable | default | accepts | meaning |",
        "|---|---|---|---|---|",
    ]
    for spec in SETTINGS.values():
        accepts = spec.accepted() if spec.checked else "text"
        lines.append(
            f"| `{spec.name}` | `{spec.env}` | {shown_default(spec)} | {accepts} | "
            f"{spec.accepts.doc} |"
        )
    lines += [
        "",
        "## Adding a setting",
        "",
        "1. Declare it once: a field of `EsperSourceConfiguration` in sources/esper/settings.py,",
        '   `name: type = setting(default, "what it does, in one line", low, high)`. Its',
        "   variable (`SOURCES__ESPER__<NAME>`), its check, this page, `.dlt/config.toml`'s block",
        "   and `doctor`'s report follow from that line.",
        "2. Read it where it is used, from the `config` the source is given (`config.name` in",
        "   `esper()`, sources/esper/__init__.py). A setting a resource reads travels in",
        "   `Options` (sources/esper/common.py): a field with no default, or `None` (a repeated",
        "   default fails the test below), filled from `c.<name>` in `esper()`'s `Options(...)`.",
        "   Every optional setting but a bool or a dict declares its range (`low`, `high`).",
        f"3. Run `{COMMAND}` and commit the page and `.dlt/config.toml` it rewrites.",
        "",
        "tests/source/test_settings.py fails when a setting's default, table row or dlt key is",
        "written anywhere else.",
        PAGE_END,
    ]
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return json.dumps(list(value))
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def config_block() -> str:
    """The `[sources.esper]` block of .dlt/config.toml: every non-secret setting commented out
    at its default (a value written there would outlive a change of the declared default)."""
    lines = [f"{BEGIN} ({COMMAND}; edit sources/esper/settings.py)", "[sources.esper]"]
    for spec in SETTINGS.values():
        if spec.secret or spec.kind is dict:  # the key: secrets.toml; the queries: below
            continue
        value = '"..."' if spec.required or spec.default is None else _toml(spec.default)
        required = "required: " if spec.required else ""
        lines.append(f"# {spec.name} = {value}  # {required}{spec.accepts.doc}")
    lines.append(END)
    return "\n".join(lines) + "\n"


def _rewritten(name: str, text: str, begin: str, end: str, block: str) -> str:
    head, found, rest = text.partition(begin)
    if not found:
        raise ValueError(f"{name} has no line starting {begin!r}")
    _, found, tail = rest.partition(end + "\n")
    if not found:
        raise ValueError(f"{name} has no line {end!r} after {begin!r}")
    return head + block + tail


def config_toml(text: str) -> str:
    """`text` (.dlt/config.toml) with its generated block rewritten."""
    return _rewritten(CONFIG, text, BEGIN, END, config_block())


def page(text: str) -> str:
    """`text` (docs/reference/settings.md) with its generated section rewritten."""
    return _rewritten(PAGE, text, PAGE_BEGIN, PAGE_END, page_section())


def stale(root: Path = ROOT) -> list[str]:
    """The files that differ from what the declaration writes."""
    found = []
    for name, rewrite in ((PAGE, page), (CONFIG, config_toml)):
        text = (root / name).read_text()
        if rewrite(text) != text:
            found.append(name)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    names = stale()
    if args.check:
        for name in names:
            print(f"{name}: stale; run `{COMMAND}`", file=sys.stderr)
        return Exit.FAILED if names else Exit.OK
    (ROOT / PAGE).write_text(page((ROOT / PAGE).read_text()))
    (ROOT / CONFIG).write_text(config_toml((ROOT / CONFIG).read_text()))
    for name in names:
        print(f"rewrote {name}")
    return Exit.OK


if __name__ == "__main__":
    raise SystemExit(main())
