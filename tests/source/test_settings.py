"""Each source setting is declared once (`EsperSourceConfiguration`, sources/esper/settings.py):
the source's signature, dlt's resolution, the check, the variables, the reference page and the
config file's block come from it, and no other file declares, defaults or tables a setting."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
from pathlib import Path

import pytest
from dlt.common.configuration.inject import get_fun_spec
from esper_warehouse.pipelines.tools import settings_docs
from esper_warehouse.sources.esper import esper
from esper_warehouse.sources.esper.http import EsperClient
from esper_warehouse.sources.esper.settings import (
    ENV_PREFIX,
    SECTIONS,
    SETTINGS,
    EsperSourceConfiguration,
    SettingError,
    _refused,
    resolve_settings,
)

ROOT = Path(__file__).resolve().parents[2]
DECLARATION = "sources/esper/settings.py"
# The client sits below the declaration (tests/test_import_graph.py, LAYERS) and is a library of
# its own: its defaults cannot be read from the declaration, so they are held to it here.
CLIENT = "sources/esper/http/"
CLIENT_DEFAULTS = {
    "timeout": "request_timeout",
    "initial_concurrency": "initial_concurrency",
    "max_concurrency": "max_concurrency",
    "max_retries": "max_retries",
    "max_retry_wait": "max_retry_wait_s",
}
REQUIRED = {"base_url": "https://tenant-api.esper.cloud/api", "api_key": "k" * 20}
REQUIRED |= {"enterprise_id": "5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"}


def _tracked(*suffixes: str) -> list[str]:
    files = subprocess.run(
        ["git", "ls-files", *(f"*{s}" for s in suffixes)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [f for f in files if (ROOT / f).exists()]


def test_the_source_takes_the_declaration_and_dlt_looks_where_the_variables_say() -> None:
    """`esper(config: EsperSourceConfiguration = dlt.config.value)`: dlt's spec of the source is
    the declaration, and its sections are the ones the variable names are made from."""
    assert get_fun_spec(esper) is EsperSourceConfiguration
    parameters = inspect.signature(esper).parameters
    assert parameters["config"].annotation in (EsperSourceConfiguration, "EsperSourceConfiguration")
    assert not set(parameters) & set(SETTINGS), "a setting is an argument of esper() again"
    reference = esper.ref  # type: ignore[attr-defined]
    assert reference.SPEC is EsperSourceConfiguration
    assert (SECTIONS[0], reference.section, reference.name) == SECTIONS
    assert "__".join(SECTIONS[:2]).upper() + "__" == ENV_PREFIX
    for spec in SETTINGS.values():
        assert spec.accepts.doc and "\n" not in spec.accepts.doc, spec.name
        assert spec.required or spec.kind in (bool, dict) or spec.accepts.low is not None


def test_dlt_resolves_the_variables_explicit_values_first_and_types_them(monkeypatch) -> None:
    monkeypatch.setenv("SOURCES__ESPER__LAG_HOURS", "4")
    monkeypatch.setenv("SOURCES__ESPER__DATA_TAP_POLL_S", "5,7")
    monkeypatch.setenv("PAGE_SIZE", "50")  # dlt reads the bare name last
    config = resolve_settings({**REQUIRED, "lag_hours": 3})
    assert (config.lag_hours, config.data_tap_poll_s, config.page_size) == (3.0, (5.0, 7.0), 50)
    assert config.max_retries == SETTINGS["max_retries"].default
    monkeypatch.setenv("SOURCES__ESPER__DATA_TAP_POLL_S", "5")  # one wait, repeated
    assert resolve_settings(REQUIRED).data_tap_poll_s == (5.0,)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"page_size": "abc"}, "SOURCES__ESPER__PAGE_SIZE (sources.esper.page_size) = 'abc'"),
        ({"lag_hours": -1}, "expected a number from 0 to 720"),
        ({"commit_every_devices": 0}, "a whole number from 1 to 10000000"),
        ({"data_tap_poll_s": [5, 4000]}, "comma-separated seconds, each from 0 to 3600"),
        ({"page_sizes": 10}, "not a setting of the esper source: page_sizes"),
    ],
)
def test_a_value_outside_its_range_is_refused_naming_it(values: dict, message: str) -> None:
    with pytest.raises(SettingError, match=re.escape(message)):
        resolve_settings({**REQUIRED, **values})


def test_a_refusal_of_the_key_does_not_quote_it() -> None:
    spec = SETTINGS["api_key"]
    assert spec.secret and "s3cret-key" not in str(_refused(spec, "s3cret-key"))


def test_the_client_s_defaults_are_the_declared_ones() -> None:
    parameters = inspect.signature(EsperClient).parameters
    for argument, name in CLIENT_DEFAULTS.items():
        assert parameters[argument].default == SETTINGS[name].default, (argument, name)
    assert parameters["key_name"].default == SETTINGS["api_key"].env
    assert parameters["url_name"].default == SETTINGS["base_url"].env


def test_the_reference_page_and_the_config_block_are_written_from_the_declaration() -> None:
    stale = settings_docs.stale()
    assert stale == [], f"{stale}: run `{settings_docs.COMMAND}` and commit what it rewrites"
    page = (ROOT / settings_docs.PAGE).read_text()
    for spec in SETTINGS.values():
        assert f"| `{spec.name}` | `{spec.env}` |" in page


def _literal(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _same(value: object, default: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, list):
        value = tuple(value)
    return value is not None and value == default


def declared_elsewhere(path: str, tree: ast.AST) -> list[str]:
    """A setting's default written again (a constant or an argument named like the setting,
    set to its default), or its dlt key looked up by hand, in one Python file."""
    found = []
    for node in ast.walk(tree):
        pairs: list[tuple[str, ast.AST | None]] = []
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            pairs += [(t.id, node.value) for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            defaulted = positional[len(positional) - len(args.defaults) :]
            pairs += [(a.arg, d) for a, d in zip(defaulted, args.defaults, strict=True)]
            kw_defaults = zip(args.kwonlyargs, args.kw_defaults, strict=True)
            pairs += [(a.arg, d) for a, d in kw_defaults if d]
        elif isinstance(node, ast.Constant) and node.value in {s.key for s in SETTINGS.values()}:
            found.append(f"{path}:{node.lineno}: {node.value!r} looked up by hand")
        for name, value in pairs:
            spec = SETTINGS.get(name.lower())
            # (a flag's False is any flag's default: not a copy of `full_scan`'s)
            if spec is not None and spec.kind is not bool and _same(_literal(value), spec.default):
                found.append(f"{path}:{node.lineno}: {name} = the default of {spec.name}")
    return found


def tabled_elsewhere(path: str, text: str) -> list[str]:
    """A row of a settings table, or a `name = value` line of a TOML file, for a source setting,
    outside the generated block of the file."""
    if path.endswith(".toml"):
        head, _, rest = text.partition(settings_docs.BEGIN)
        text = head + rest.partition(settings_docs.END)[2]
        pattern = r"^#?\s*({names})\s*="
    else:
        head, _, rest = text.partition(settings_docs.PAGE_BEGIN)
        text = head + rest.partition(settings_docs.PAGE_END)[2]
        pattern = r"^\|\s*`({names})`\s*\|"
    names = "|".join(SETTINGS)
    return [
        f"{path}: {match.group(1)}"
        for match in re.finditer(pattern.format(names=names), text, re.MULTILINE)
    ]


def test_no_setting_is_declared_defaulted_or_tabled_anywhere_else() -> None:
    """Adding a setting touches its declaration (and the generated page): a default written
    again, a variable name spelled by hand, or a settings table elsewhere fails here."""
    problems = []
    for path in _tracked(".py"):
        if path == DECLARATION or path.startswith(("tests/", CLIENT)):
            continue
        problems += declared_elsewhere(path, ast.parse((ROOT / path).read_text()))
    for path in _tracked(".md", ".toml", ".toml.example"):
        if path == "README.md":  # the next test's
            continue
        # decisions.md is history; a tenants file names its own base_url, enterprise_id
        if path == "docs/decisions.md" or (".toml" in path and not path.startswith(".dlt/")):
            continue
        problems += tabled_elsewhere(path, (ROOT / path).read_text())
    assert problems == [], "\n".join(problems)


def test_the_readme_holds_no_settings_table() -> None:
    """README links to the reference page (docs/reference/settings.md) instead of a table of
    its own. (Fails until README's "Configuration reference" table moves out: issue 55.)"""
    assert tabled_elsewhere("README.md", (ROOT / "README.md").read_text()) == []


def test_the_scan_finds_a_copied_default_a_spelled_variable_and_a_table() -> None:
    copied = ast.parse(
        'LAG_HOURS = 2.0\ndef f(page_size=1000, *, max_retries=8): pass\nx = "sources.esper.lag_hours"'
    )
    assert len(declared_elsewhere("x.py", copied)) == 4
    assert declared_elsewhere("x.py", ast.parse("MAX_RETRIES = 2\nlag_hours = 'x'")) == []
    table = "| setting | variable |\n|---|---|\n| `lag_hours` | `SOURCES__ESPER__LAG_HOURS` |\n"
    assert tabled_elsewhere("docs/x.md", table) == ["docs/x.md: lag_hours"]
    generated = f"{settings_docs.PAGE_BEGIN} -->\n{table}{settings_docs.PAGE_END}\n"
    assert tabled_elsewhere("docs/x.md", generated) == []
    assert tabled_elsewhere("docs/x.md", generated + table) == ["docs/x.md: lag_hours"]
    toml = f"{settings_docs.BEGIN}\n# lag_hours = 2.0\n{settings_docs.END}\nlag_hours = 3\n"
    assert tabled_elsewhere(".dlt/config.toml", toml) == [".dlt/config.toml: lag_hours"]
