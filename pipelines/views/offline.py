"""A notebook page that opens anywhere: static HTML, inline SVG charts, no network at all.

`marimo export html` writes an interactive page that loads marimo's JavaScript from a CDN: on a
locked-down machine, or attached to a ticket and opened offline, it is a white page. This turns
what such a page recorded (every cell's outputs, stored in the page as its "session") into a
self-contained page: markdown and HTML as they are, each Vega-Lite chart drawn to an inline SVG
(vl-convert, no browser needed), marimo's widgets as what they showed (a table as an HTML table,
a statistic as a box, a dropdown as its chosen value, a code editor as its code). No `http(s)`
resource is referenced: the page renders the same with the network off.

The notebooks escape every value from the API (`notebooks/_common.py` `text`); the page does not
rely on it alone. What it copies never carries script (`<script>`, frames, `on…` handlers and
`javascript:` links are dropped, and a resource that is not `data:` is not referenced), and its
Content-Security-Policy lets the browser run no script and fetch nothing at all.
"""

from __future__ import annotations

import hashlib
import html
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from .. import readable

VEGA_LITE = "application/vnd.vegalite.v6+json"
# The page needs no script and no request: inline styles, inline SVG and `data:` images only.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:"
DROPPED = frozenset({"script", "iframe", "frame", "object", "embed", "base", "link", "meta"})
VOID = frozenset({"frame", "embed", "base", "link", "meta"})  # those of them with no end tag
FETCHING = frozenset({"src", "srcset", "href", "xlink:href", "poster", "background", "action",
                      "formaction", "data"})  # fmt: skip
# The report exports the notebooks with this variable set to its folder: a notebook's table then
# carries all its rows into the page (`notebooks/_common.py` `table`), up to `TABLE_ROWS`; a
# longer one is also written whole as `<name>.csv` in that folder, and says so.
REPORT_DIR_ENV = "ESPER_REPORT_DIR"
TABLE_ROWS = 5_000
SHOWN_ROWS = 15  # rows a table shows open; the others are one click away, in a closed section

STYLE = """
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328;
       margin: 0; background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 48px; background: white; }
h1 { font-size: 26px; } h2 { font-size: 20px; margin-top: 28px; } h3 { font-size: 16px; }
.cell { margin: 14px 0; } .paragraph { display: block; margin: 6px 0; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
th, td.id { white-space: nowrap; }
.stat { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px; min-width: 120px; }
.stat .label { color: #57606a; font-size: 12px; } .stat .value { font-size: 24px; font-weight: 600; }
.stat .caption { color: #57606a; font-size: 12px; }
.control { color: #57606a; } .more { color: #57606a; font-style: italic; }
.callout { border-left: 4px solid #54aeff; background: #f6f8fa; padding: 6px 12px; }
pre { background: #f6f8fa; padding: 8px 12px; overflow-x: auto; }
svg { max-width: 100%; height: auto; overflow: visible; }
.wide { max-width: 100%; overflow-x: auto; } details.rows > summary { cursor: pointer; color: #0969da; }
.wide::-webkit-scrollbar { height: 10px; }
.wide::-webkit-scrollbar-thumb { background: #afb8c1; border-radius: 5px; }
.wide::-webkit-scrollbar-track { background: #f3f4f6; }
.control .paragraph, summary .paragraph, p.label .paragraph { display: inline; }
.control { white-space: nowrap; margin: 4px 16px 4px 0; }
footer { color: #57606a; font-size: 12px; margin-top: 32px; }
"""


def session_of(page: Path) -> dict[str, Any]:
    """The cell outputs a `marimo export html` page recorded (its "session")."""
    text = page.read_text(encoding="utf-8")
    start = text.index('"session": ') + len('"session": ')
    recorded, _ = json.JSONDecoder().raw_decode(text, start)
    return recorded


def _json(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


def chart_svg(spec: str | dict[str, Any]) -> str:
    """A Vega-Lite spec drawn as an SVG element."""
    import vl_convert  # the `notebooks` extra: only the report's pages draw charts

    svg = vl_convert.vegalite_to_svg(drawable(spec))
    return svg[svg.index("<svg") :] if "<svg" in svg else svg


def drawable(spec: str | dict[str, Any]) -> str:
    """A Vega-Lite spec as JSON text whose every string is `readable.visible`: a control
    character in an app or device name is refused by XML, and the chart renderer aborts the
    whole process on it (SIGABRT) instead of raising."""
    value = json.loads(spec) if isinstance(spec, str) else spec
    return json.dumps(_visible_strings(value))


def _visible_strings(value: Any) -> Any:
    if isinstance(value, str):
        return readable.visible(value)
    if isinstance(value, list):
        return [_visible_strings(v) for v in value]
    if isinstance(value, dict):
        return {readable.visible(k): _visible_strings(v) for k, v in value.items()}
    return value


def _cell_text(value: Any) -> str:
    if value is None or value == [] or value == {}:  # no reasons, no items: nothing to read
        return ""
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return html.escape(readable.visible(value if isinstance(value, str) else json.dumps(value)))


def _rows_html(rows: list[dict[str, Any]], columns: list[str]) -> str:
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            kind = " class=num" if numeric else " class=id" if _is_id(c) else ""
            cells.append(f"<td{kind}>{_cell_text(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _is_id(column: str) -> bool:
    """A column of ids (`id`, `device_id`): kept on one line, since a UUID would break at each
    hyphen and a table squeezed to the page would stack it four characters a line; the table
    scrolls instead."""
    return column == "id" or column.endswith("_id")


def table_html(rows: list[dict[str, Any]], total: int | None = None) -> str:
    """Rows (dicts) as an HTML table that holds every one of them: the first `SHOWN_ROWS` open,
    the others in a closed section below. `total`: the rows the table has, when the page was
    given fewer (marimo writes a table's first page only): then it says "first N of M"."""
    if not rows:
        return '<p class="more">(no rows)</p>'
    columns = [c for c in rows[0] if not c.startswith("_marimo")]
    total = max(total or 0, len(rows))
    shown = rows if len(rows) <= SHOWN_ROWS + 5 else rows[:SHOWN_ROWS]
    parts = [_rows_html(shown, columns)]
    if len(shown) < len(rows):
        # An id inside the section: a link to `#<id>` opens it (browsers open a closed
        # <details> to show the target of a fragment).
        anchor = "rows-" + hashlib.sha1(json.dumps(rows, default=str).encode()).hexdigest()[:10]
        parts.append(
            f'<details class="rows"><summary>{len(rows):,} rows: show the other '
            f'{len(rows) - len(shown):,}</summary><div id="{anchor}">'
            f"{_rows_html(rows[len(shown) :], columns)}</div></details>"
        )
    if total > len(rows):
        parts.append(
            f'<p class="more cut">first {readable.shown_of(len(rows), total)} rows; the others '
            "are in the interactive page only</p>"
        )
    return "".join(parts)


def _fetches(tag: str, name: str, value: str) -> bool:
    """True when an attribute would run script or make the browser ask the network."""
    if name.startswith("on"):
        return True
    if name not in FETCHING:
        return False
    target = "".join(value.split()).lower()  # "java\tscript:" is still javascript:
    if tag in ("a", "area") and name in ("href", "xlink:href"):  # followed only when clicked:
        return target.startswith(("javascript:", "vbscript:", "data:"))  # kept unless script
    return not target.startswith("data:") and not target.startswith("#")  # SVG <image href>


def _safe_tag(tag: str, attrs: list[tuple[str, str | None]], written: str) -> str:
    """A start tag as it was written, or rebuilt without the attributes that run or fetch."""
    if not any(_fetches(tag, name, value or "") for name, value in attrs):
        return written
    kept = "".join(
        f' {name}="{html.escape(value or "")}"' if value is not None else f" {name}"
        for name, value in attrs
        if not _fetches(tag, name, value or "")
    )
    end = "/>" if written.rstrip().endswith("/>") else ">"
    return f"<{tag}{kept}{end}"


class _Static(HTMLParser):
    """Rewrites marimo's custom elements into plain HTML, copying everything else as it is."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.closing: list[str] = []  # what each open marimo element closes with
        self.dropped = 0  # depth inside an element that is not copied (`DROPPED`)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in DROPPED:
            self.dropped += tag not in VOID
            return
        if self.dropped:
            return
        if not tag.startswith("marimo-"):
            self.out.append(_safe_tag(tag, attrs, self.get_starttag_text() or ""))
            return
        data = {k.removeprefix("data-"): _json(v) for k, v in attrs}
        opened, closing = self._replace(tag, data)
        self.out.append(opened)
        self.closing.append(closing)

    def handle_endtag(self, tag: str) -> None:
        if tag in DROPPED:
            self.dropped = max(0, self.dropped - (tag not in VOID))
            return
        if self.dropped:
            return
        if tag.startswith("marimo-"):
            self.out.append(self.closing.pop() if self.closing else "")
        else:
            self.out.append(f"</{tag}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in DROPPED or self.dropped:
            return
        if tag.startswith("marimo-"):
            self.handle_starttag(tag, attrs)
            self.handle_endtag(tag)
        else:
            self.out.append(_safe_tag(tag, attrs, self.get_starttag_text() or ""))

    def handle_data(self, data: str) -> None:
        if not self.dropped:
            self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        if not self.dropped:
            self.out.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        if not self.dropped:
            self.out.append(f"&#{name};")

    def handle_comment(self, data: str) -> None:
        pass

    @staticmethod
    def _replace(tag: str, data: dict[str, Any]) -> tuple[str, str]:
        label = data.get("label")
        # Labels and the HTML a widget holds are marimo's rendering: copied through the same rules.
        label_html = f"{static_html(label)}: " if isinstance(label, str) and label else ""
        if tag == "marimo-stat":
            caption = data.get("caption")
            return (
                '<div class="stat">'
                f'<div class="label">{html.escape(str(label or ""))}</div>'
                f'<div class="value">{html.escape(str(data.get("value", "")))}</div>'
                + (f'<div class="caption">{html.escape(str(caption))}</div>' if caption else "")
                + "</div>",
                "",
            )
        if tag == "marimo-table":
            rows = data.get("data")
            rows = _json(rows) if isinstance(rows, str) else rows
            total = data.get("total-rows")
            rows = rows if isinstance(rows, list) else []
            label = f'<p class="label">{label_html.removesuffix(": ")}</p>' if label_html else ""
            return label + table_html(rows, total if isinstance(total, int) else None), ""
        if tag == "marimo-mime-renderer":
            mime, payload = data.get("mime"), data.get("data")
            if mime == VEGA_LITE:
                return chart_svg(payload), ""
            if mime == "text/html":
                return static_html(str(payload)), ""
            return f"<pre>{html.escape(str(payload))}</pre>", ""
        if tag == "marimo-dropdown":
            chosen = ", ".join(map(str, data.get("initial-value") or [])) or "—"
            return f'<p class="control">{label_html}<b>{html.escape(chosen)}</b></p>', ""
        if tag == "marimo-code-editor":
            shown_label = f'<p class="label">{static_html(label)}</p>' if label_html else ""
            return f"{shown_label}<pre>{html.escape(str(data.get('initial-value')))}</pre>", ""
        if tag == "marimo-accordion":
            labels = " · ".join(static_html(str(x)) for x in data.get("labels") or [])
            return f"<details open><summary>{labels}</summary>", "</details>"
        if tag == "marimo-callout-output":
            return f'<div class="callout">{static_html(str(data.get("html", "")))}</div>', ""
        return "", ""  # a wrapper (marimo-ui-element, ...): keep what it holds


def static_html(fragment: str) -> str:
    """An HTML output of a cell with marimo's elements replaced by plain HTML."""
    parser = _Static()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.out)


def write_offline(page: Path, target: Path, title: str, footer: str) -> Path:
    """Write the self-contained page of an exported notebook `page` to `target`."""
    parts = []
    for cell in session_of(page)["cells"]:
        shown = []
        for output in cell["outputs"]:
            if output["type"] != "data":
                continue
            data = output["data"]
            if VEGA_LITE in data:
                shown.append(chart_svg(data[VEGA_LITE]))
            elif "text/html" in data:
                shown.append(static_html(data["text/html"]))
            elif "text/markdown" in data:
                shown.append(static_html(data["text/markdown"]))
            elif (text := data.get("text/plain", "").strip()) and text != "None":
                shown.append(f"<pre>{html.escape(text)}</pre>")
        if shown:
            parts.append(f'<div class="cell">{"".join(shown)}</div>')
    target.write_text(
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><main>{''.join(parts)}<footer>{footer}</footer></main></body></html>\n",
        encoding="utf-8",
    )
    return target
