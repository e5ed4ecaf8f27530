"""Everything from the API is text on a page: an alias, a name or a label holding markup shows as
that markup's characters, in the offline report opened in headless Chromium (no script runs, no
request leaves) and in what marimo's own page renders (its recorded outputs)."""

from __future__ import annotations

import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines.build.models import build_models
from esper_warehouse.pipelines.views import offline, report

from .browser import Opened, open_offline
from .drawn import charts

REMOTE = "http://198.51.100.7/p.png"  # TEST-NET-2: nothing answers; the proxy is dead anyway
# A backtick closes a markdown code span; then an event handler, a markdown image off the
# machine, a script, and `$` (marimo reads $...$ as a formula).
HOSTILE = (
    "`x` <img src=x onerror=\"document.title='pwned'\"> ![p](" + REMOTE + ") "
    "<script>document.title='pwned'</script> $x$"
    # every character that acts instead of showing (readable.py): a terminal's hyperlink
    # (OSC 8), title and colour sequences, and the controls XML refuses in an SVG chart
    " \x1b]8;;http://198.51.100.7/\x1b\\link\x1b]8;;\x1b\\ \x1b]0;title\x07 \x1b[31mred\x1b[0m "
    + "".join(map(chr, [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]))
    + "\u202e\u2066"
)
SHOWN = "<img src=x onerror="  # how the hostile text reads on the page, as text
PAGES = ("rollouts", "fleet_overview")


@pytest.fixture(scope="module")
def hostile_report(demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rollouts and fleet pages of a warehouse whose operation aliases, command names, device,
    group, pipeline and stage names are all `HOSTILE` (raw tables edited, models rebuilt)."""
    root = tmp_path_factory.mktemp("hostile")
    warehouse = root / "hostile.duckdb"
    shutil.copy(demo_warehouse, warehouse)
    with duckdb.connect(str(warehouse)) as con:
        for table, column in (
            ("operations", "alias"),
            ("command_requests", "command"),
            ("devices", "name"),
            ("groups", "name"),
            ("pipelines", "name"),
            ("pipeline_runs", "pipeline_name"),
            ("pipeline_stages", "name"),
            ("applications", "application_name"),
            ("device_apps", "app_name"),
            ("dep_tokens", "token_name"),
            ("provisioning_profiles", "name"),
        ):
            con.execute(f"update esper.{table} set {column} = ? || ' ' || id", [HOSTILE])
    build_models(warehouse)
    out = root / "report"
    out.mkdir()
    with ThreadPoolExecutor(2) as pool:  # one marimo process each, as `report` runs them
        exports = pool.map(
            lambda name: report.export_notebook(
                report.NOTEBOOKS_DIR / f"{name}.py", out, warehouse
            ),
            PAGES,
        )
        for export in exports:
            assert export.ok, export.errors[-3000:]
    return out


@pytest.fixture(scope="module")
def opened(hostile_report: Path) -> dict[str, Opened]:
    """Each offline page as headless Chromium rendered it, the network off."""
    return {page: open_offline(hostile_report / f"{page}.html") for page in PAGES}


def _title(dom: str) -> str:
    found = re.search(r"<title>(.*?)</title>", dom, re.S)
    return found.group(1) if found else ""


@pytest.mark.parametrize("page", PAGES)
def test_hostile_values_are_text_in_the_offline_page(opened: dict[str, Opened], page: str) -> None:
    rendered = opened[page]
    assert rendered.requests == [], "the page asked for the network"
    assert "pwned" not in _title(rendered.dom), "a script from the API ran"
    assert not re.search(r"<img[^>]*onerror", rendered.dom), "an element with an API handler"
    assert f'src="{REMOTE}"' not in rendered.dom
    # what Chromium serialises as the text of the page: the markup, shown, not obeyed
    assert SHOWN.replace("<", "&lt;").replace(">", "&gt;") in rendered.dom


def test_the_drill_down_heading_shows_the_alias_as_written(opened: dict[str, Opened]) -> None:
    """The heading over a rollout's devices (`### Devices of …`) carries the picked label."""
    dom = opened["rollouts"].dom
    headings = re.findall(r"<h3[^>]*>(.*?)</h3>", dom, re.S)
    shown = [h for h in headings if h.startswith("Devices of")]
    assert len(shown) == 2, headings  # one for commands, one for operations
    for heading in (h.lower() for h in shown):  # a command's name is shown upper-cased
        assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in heading, heading
        assert f"![p]({REMOTE})" in heading and "`x`" in heading and "$x$" in heading, heading


def test_the_pipelines_section_shows_pipeline_and_stage_names_as_written(
    opened: dict[str, Opened],
) -> None:
    """Pipeline names label the chart's rows and head its tables, stage names head its cells."""
    dom = opened["rollouts"].dom
    title = "Pipeline runs not ended, stage by stage"
    view = charts(dom)[title].view(title)
    assert view.axis("y").labels and all(SHOWN in text for *_, text in view.axis("y").labels)
    assert any(SHOWN in text for *_, text in view.texts), view.texts  # the stage names
    escaped = SHOWN.replace("<", "&lt;").replace(">", "&gt;")
    for label in ("Each pipeline's latest run", "Failing stages of runs not ended"):
        table = dom[dom.index(label) :]
        assert escaped in table[: table.index("</table>")], label


@pytest.mark.parametrize("page", PAGES)
def test_marimo_s_own_page_renders_no_markup_from_the_api(hostile_report: Path, page: str) -> None:
    """marimo's interactive page renders its recorded outputs as HTML in the browser: none of
    them may hold the API's markup as markup (it cannot be opened offline: it needs the CDN)."""
    outputs = [
        str(output.get("data", ""))
        for cell in offline.session_of(hostile_report / f"{page}.interactive.html")["cells"]
        for output in cell["outputs"]
    ]
    assert any("onerror" in text for text in outputs), "the hostile values are not on the page"
    for text in outputs:
        assert "<img src=x" not in text and "<script>document" not in text, text[:2000]
        assert f'src="{REMOTE}"' not in text and f'src=\\\\"{REMOTE}' not in text, text[:2000]


@pytest.mark.parametrize(
    ("fragment", "kept"),
    [
        ("<p>a<script>document.title='x'</script>b</p>", "<p>ab</p>"),
        ('<img src=x onerror="alert(1)">', "<img>"),
        (f'<img alt="p" src="{REMOTE}"/>', '<img alt="p"/>'),
        ('<img src="data:image/png;base64,AA">', '<img src="data:image/png;base64,AA">'),
        ('<a href="java\tscript:alert(1)">j</a>', "<a>j</a>"),
        ('<a href="rollouts.interactive.html">i</a>', '<a href="rollouts.interactive.html">i</a>'),
        ('<iframe src="https://e.example/">x</iframe><frame src=x>y', "y"),
        ('<svg><image href="https://e.example/i.png"/></svg>', "<svg><image/></svg>"),
        ("<marimo-callout-output data-html='\"<img src=x onerror=a()>\"'></marimo-callout-output>",
         '<div class="callout"><img></div>'),
    ],
)  # fmt: skip
def test_the_offline_page_copies_no_script_and_no_remote_resource(fragment: str, kept: str) -> None:
    """A second wall behind the notebooks' escaping: what `offline` copies runs and fetches
    nothing, and the page says so to the browser (its Content-Security-Policy)."""
    assert offline.static_html(fragment) == kept


def test_the_offline_page_forbids_script_and_requests(hostile_report: Path) -> None:
    page = (hostile_report / "rollouts.html").read_text(encoding="utf-8")
    assert f'<meta http-equiv="Content-Security-Policy" content="{offline.CSP}">' in page
    assert "default-src 'none'" in offline.CSP and "script-src" not in offline.CSP


def test_status_shows_the_api_s_escapes_as_text(hostile_report: Path, capsys) -> None:
    """A credential's name holding a hyperlink (OSC 8), a title and a colour sequence and every
    control character: `status` prints them as their escapes (pipelines/readable.py)."""
    from esper_warehouse.pipelines import cli

    warehouse = hostile_report.parent / "hostile.duckdb"
    cli.main(["status", "--warehouse", str(warehouse)])
    shown = capsys.readouterr()
    assert "\\x1b]8;;http://198.51.100.7/" in shown.out, "the hostile names are not shown"
    for text in (shown.out, shown.err):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)
