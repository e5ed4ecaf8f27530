"""What a chart draws, read back from the SVG that Vega (vl-convert) wrote: the marks' geometry,
the axes' scales and the legends' places, so a test checks what a reader sees, not the data the
chart was given.

Vega writes one `<g class="mark-group role-scope concat_N_group">` per sub-chart of a
concatenation (`role-frame` for a single chart); inside it each axis is a `role-axis` group whose
`aria-label` says its scale (``X-axis titled 'Devices' for a linear scale ...``), with its ticks
as `<line transform="translate(x,y)">` and its labels as `<text>` in the same order; each bar is a
`<path aria-roledescription="bar" d="Mx,yhWvHh-WZ">`, each area a path of `M`/`L` points, each
text mark a `<text>` in a `role-mark` group. Every position is relative to the groups'
`translate(...)`s, which are summed here. Vega draws every axis half a pixel off (a crisp line),
which the axes here take back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
_TRANSLATE = re.compile(r"translate\(\s*(-?[\d.e-]+)[ ,]+(-?[\d.e-]+)\s*\)")
_VIEW = re.compile(r"^(concat|hconcat|vconcat)_\d+_group$")
_PATH = re.compile(r"([MmLlHhVvZzAaCcQqSsTt])([^MmLlHhVvZzAaCcQqSsTt]*)")
_COLOURLESS = {None, "", "none", "transparent", "white", "#fff", "#ffffff"}


@dataclass
class Mark:
    kind: str  # Vega's aria-roledescription: "bar", "area mark", "line mark", "point", "tick"
    points: list[tuple[float, float]]  # absolute, in pixels
    fill: str | None
    stroke: str | None
    label: str  # the aria-label Vega wrote (the datum's fields)

    @property
    def box(self) -> tuple[float, float, float, float]:
        xs, ys = [p[0] for p in self.points], [p[1] for p in self.points]
        return min(xs), min(ys), max(xs), max(ys)

    @property
    def colours(self) -> set[str]:
        return {c for c in (self.fill, self.stroke) if c not in _COLOURLESS}


@dataclass
class Axis:
    orient: str  # "x" or "y"
    description: str  # Vega's aria-label: title and scale
    ticks: list[float] = field(default_factory=list)  # tick positions (absolute pixels)
    labels: list[tuple[float, float, str]] = field(default_factory=list)  # (x, y, text)

    @property
    def title(self) -> str | None:
        found = re.search(r"titled '(.*?)' for", self.description)
        return found.group(1) if found else None

    @property
    def is_linear(self) -> bool:
        return "linear scale" in self.description

    def value(self, pixel: float) -> float:
        """The value a linear axis puts at `pixel` (fitted on its first and last tick)."""
        pairs = [(p, _parse(t)) for p, (_, _, t) in zip(self.ticks, self.labels, strict=False)]
        (p0, v0), (p1, v1) = pairs[0], pairs[-1]
        return v0 + (pixel - p0) * (v1 - v0) / (p1 - p0)

    @property
    def per_pixel(self) -> float:
        """How much one pixel is worth on this axis (what the eye cannot tell apart)."""
        return abs(self.value(1) - self.value(0))

    def category(self, low: float, high: float) -> str | None:
        """The label a band axis shows within [low, high] (the band of a bar)."""
        at = 0 if self.orient == "x" else 1
        inside = [lab[2] for lab in self.labels if low - 0.5 <= lab[at] <= high + 0.5]
        return inside[0] if len(inside) == 1 else None


@dataclass
class View:
    """One chart: a single chart, or one part of a concatenation."""

    title: str | None = None
    marks: list[Mark] = field(default_factory=list)
    axes: list[Axis] = field(default_factory=list)
    titles_at: list[float] = field(default_factory=list)  # y of the title text
    texts: list[tuple[float, float, str]] = field(default_factory=list)  # text marks (x, y, text)

    def axis(self, orient: str) -> Axis:
        return next(a for a in self.axes if a.orient == orient)

    def bars(self) -> list[Mark]:
        return [m for m in self.marks if m.kind == "bar"]

    @property
    def box(self) -> tuple[float, float, float, float]:
        xs, ys = [], []
        for mark in self.marks:
            x0, y0, x1, y1 = mark.box
            xs += [x0, x1]
            ys += [y0, y1]
        for axis in self.axes:
            xs += [lab[0] for lab in axis.labels]
            ys += [lab[1] for lab in axis.labels]
        ys += self.titles_at
        return min(xs), min(ys), max(xs), max(ys)


@dataclass
class Legend:
    description: str
    labels: list[tuple[float, float, str]] = field(default_factory=list)
    symbols: list[tuple[float, float, str]] = field(default_factory=list)  # (x, y, colour)

    @property
    def colours(self) -> dict[str, str]:
        """label -> colour, as the legend pairs them (symbol and label in the same entry)."""
        return {
            text: colour
            for (_, _, text), (_, _, colour) in zip(self.labels, self.symbols, strict=True)
        }

    @property
    def box(self) -> tuple[float, float, float, float]:
        xs = [p[0] for p in self.labels + self.symbols]
        ys = [p[1] for p in self.labels + self.symbols]
        return min(xs), min(ys), max(xs), max(ys)


@dataclass
class Drawing:
    views: list[View]
    legends: list[Legend]

    def view(self, title: str) -> View:
        found = [v for v in self.views if v.title == title]
        assert len(found) == 1, f"{title!r} in {[v.title for v in self.views]}"
        return found[0]


def _parse(text: str) -> float:
    found = _NUMBER.search(text.replace(",", "").replace("\u2212", "-"))
    assert found, f"no number in axis label {text!r}"
    return float(found.group(0)) / (100 if text.strip().endswith("%") else 1)


def _path_points(d: str) -> list[tuple[float, float]]:
    """The corners of a path made of M/L/H/V commands (bars, areas, lines); curves give their
    end points, which is enough for the boxes of symbols."""
    x = y = 0.0
    points: list[tuple[float, float]] = []
    for command, args in _PATH.findall(d):
        values = [float(v) for v in _NUMBER.findall(args)]
        relative = command.islower()
        c = command.upper()
        if c in "ML":
            for i in range(0, len(values) - 1, 2):
                x, y = (x + values[i], y + values[i + 1]) if relative else values[i : i + 2]
                points.append((x, y))
        elif c == "H":
            for v in values:
                x = x + v if relative else v
                points.append((x, y))
        elif c == "V":
            for v in values:
                y = y + v if relative else v
                points.append((x, y))
        elif c in "ACQST" and len(values) >= 2:
            x, y = (x + values[-2], y + values[-1]) if relative else values[-2:]
            points.append((x, y))
    return points


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, tuple[float, float], dict]] = []  # (tag, offset, context)
        self.views: list[View] = []
        self.legends: list[Legend] = []
        self.text: list[str] | None = None
        self.text_at: tuple[float, float] = (0.0, 0.0)

    def _context(self) -> dict:
        return self.stack[-1][2] if self.stack else {}

    def _offset(self) -> tuple[float, float]:
        return self.stack[-1][1] if self.stack else (0.0, 0.0)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        ox, oy = self._offset()
        if found := _TRANSLATE.search(a.get("transform", "")):
            ox, oy = ox + float(found.group(1)), oy + float(found.group(2))
        context = dict(self._context())
        classes = a.get("class", "").split()
        if (tag == "g" and "role-frame" in classes) or any(_VIEW.match(c) for c in classes):
            context["view"] = View()
            self.views.append(context["view"])
        elif tag == "g" and "role-axis" in classes and a.get("aria-label", "")[:2] in ("X-", "Y-"):
            context["axis"] = Axis(a["aria-label"][0].lower(), a["aria-label"])
            context["view"].axes.append(context["axis"])
        elif tag == "g" and "role-legend" in classes:
            context["legend"] = Legend(a.get("aria-label", ""))
            self.legends.append(context["legend"])
        elif tag == "g" and len(classes) > 1 and classes[0].startswith("mark-"):
            context["role"] = classes[1]  # role-axis-tick, role-axis-label, role-mark, ...
        self.stack.append((tag, (ox, oy), context))
        self._mark(tag, a, (ox, oy), context)

    def _mark(self, tag: str, a: dict, at: tuple[float, float], context: dict) -> None:
        role = context.get("role")
        if tag == "line" and context.get("axis") and role == "role-axis-tick":
            axis = context["axis"]
            # Vega shifts every axis by half a pixel (a crisp line): where the value is drawn
            axis.ticks.append((at[0] if axis.orient == "x" else at[1]) - 0.5)
        elif tag == "text":
            self.text, self.text_at = [], at
        elif tag == "path" and role == "role-legend-symbol":
            context["legend"].symbols.append((*at, a.get("fill") or a.get("stroke") or ""))
        elif tag == "path" and a.get("aria-roledescription") and context.get("view"):
            points = [(at[0] + x, at[1] + y) for x, y in _path_points(a.get("d", ""))] or [at]
            context["view"].marks.append(
                Mark(a["aria-roledescription"], points, a.get("fill"), a.get("stroke"),
                     a.get("aria-label", ""))
            )  # fmt: skip

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "text" and self.text is not None:
            self._text("".join(self.text))
            self.text = None
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def _text(self, text: str) -> None:
        context, (x, y) = self._context(), self.text_at
        role = context.get("role")
        if role == "role-axis-label" and context.get("axis"):
            context["axis"].labels.append((x, y, text))
        elif role == "role-legend-label" and context.get("legend"):
            context["legend"].labels.append((x, y, text))
        elif role == "role-mark" and context.get("view"):
            context["view"].texts.append((x, y, text))
        elif role == "role-title-text" and context.get("view") and context["view"].title is None:
            context["view"].title = text
            context["view"].titles_at.append(y)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)


def read_svg(svg: str) -> Drawing:
    """The views (marks, axes, title) and legends an SVG chart draws."""
    reader = _Reader()
    reader.feed(svg)
    reader.close()
    views = [v for v in reader.views if v.marks or v.axes]
    return Drawing(views, reader.legends)


def svgs(page_html: str) -> list[str]:
    """Every inline SVG chart of a page (the offline report's), in page order."""
    return re.findall(r"<svg\b.*?</svg>", page_html, re.S)


def charts(page_html: str) -> dict[str, Drawing]:
    """Every chart of a page by the titles of its views."""
    found: dict[str, Drawing] = {}
    for svg in svgs(page_html):
        drawing = read_svg(svg)
        for view in drawing.views:
            if view.title:
                found[view.title] = drawing
    return found


def stacks(view: View) -> dict[str, list[tuple[float, float]]]:
    """The bars of a bar chart by the category their band axis shows: each bar's (start, end)
    in the values of the other (linear) axis."""
    band = next((a for a in view.axes if not a.is_linear), None)
    linear = next(a for a in view.axes if a.is_linear)
    assert band is not None, "a bar chart with a band axis"
    out: dict[str, list[tuple[float, float]]] = {}
    for bar in view.bars():
        x0, y0, x1, y1 = bar.box
        low, high = (x0, x1) if band.orient == "x" else (y0, y1)
        category = band.category(low, high)
        assert category is not None, f"a bar under no single label: {bar.label}"
        ends = sorted(linear.value(p) for p in ((y1, y0) if linear.orient == "y" else (x0, x1)))
        out.setdefault(category, []).append((ends[0], ends[1]))
    return out


def drawn_total(segments: list[tuple[float, float]]) -> float:
    """What a reader reads off a stack: from its lowest to its highest end."""
    return max(e for _, e in segments) - min(s for s, _ in segments)


def overlap(segments: list[tuple[float, float]]) -> float:
    """How much of a stack is drawn twice (bars hiding one another): 0 for a true stack."""
    return sum(e - s for s, e in segments) - drawn_total(segments)


def area_stacks(view: View) -> list[list[tuple[float, float]]]:
    """The areas of a stacked area chart at each tick of its (time) x axis, left to right: each
    area's (bottom, top) there, in the values of the y axis."""
    x_axis, y_axis = view.axis("x"), view.axis("y")
    out: list[list[tuple[float, float]]] = []
    for tick in x_axis.ticks:
        segments = []
        for area in (m for m in view.marks if m.kind == "area mark"):
            ys = [y for x, y in area.points if abs(x - tick) <= 1]
            if ys:
                segments.append(tuple(sorted(y_axis.value(y) for y in (max(ys), min(ys)))))
        out.append(segments)
    return out
