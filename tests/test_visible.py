"""Every character that acts instead of showing is written as its escape, wherever the API's text
is shown: on a terminal (`readable.Visible`), in a chart's SVG (`offline.drawable`)."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from esper_warehouse.pipelines import readable
from esper_warehouse.pipelines.views import offline

# every C0 and C1 control but tab and newline, DEL, and the bidirectional overrides and isolates
ACTING = [
    *(chr(c) for c in range(0x00, 0x20) if chr(c) not in "\t\n"),
    *(chr(c) for c in range(0x7F, 0xA0)),
    *(chr(c) for c in range(0x202A, 0x202F)),
    *(chr(c) for c in range(0x2066, 0x206A)),
]
# a disguised hyperlink (OSC 8), a window title, a colour: each starts with ESC
SEQUENCES = [
    "\x1b]8;;http://198.51.100.7/\x1b\\click\x1b]8;;\x1b\\",
    "\x1b]0;pwned\x07",
    "\x1b[31mred\x1b[0m",
]


@pytest.mark.parametrize("char", ACTING, ids=lambda c: f"U+{ord(c):04X}")
def test_an_acting_character_is_shown_as_its_escape(char: str) -> None:
    shown = readable.visible(f"a{char}b")
    assert char not in shown
    code = ord(char)
    assert shown == (f"a\\x{code:02x}b" if code < 0x100 else f"a\\u{code:04x}b")


def test_text_that_shows_is_left_as_it_is() -> None:
    text = "Café ünïcode 名前 — tab\there\nnew line, emoji 🙂, quotes \"'` <b>"
    assert readable.visible(text) == text


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_a_terminal_sequence_written_through_visible_reaches_the_terminal_as_text(
    sequence: str,
) -> None:
    terminal = io.StringIO()
    stream = readable.Visible(terminal)
    assert stream.write(f"name: {sequence}\n") == len(sequence) + 7
    assert "\x1b" not in terminal.getvalue() and "\x07" not in terminal.getvalue()
    assert terminal.getvalue().startswith("name: \\x1b")


def test_the_command_line_shows_an_escape_from_the_api_as_text(capsys, monkeypatch) -> None:
    """`esper-warehouse`'s output and log lines go through `Visible`, and only while it runs."""
    from esper_warehouse.pipelines import cli

    outer = __import__("sys").stdout
    hostile = "".join(SEQUENCES) + "".join(ACTING)
    monkeypatch.setattr(cli, "_main", lambda argv: print(hostile) or 0)
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", out)
    assert "\\x1b]8;;http://198.51.100.7/" in out
    assert __import__("sys").stdout is outer


def test_a_chart_whose_labels_hold_every_acting_character_is_drawn_as_valid_svg() -> None:
    """vl-convert aborts the process on a control character in an SVG's text (NonXmlChar)."""
    name = "app " + "".join(ACTING)
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": name,
        "data": {"values": [{"app": name, "devices": 3}]},
        "mark": "bar",
        "encoding": {
            "x": {"field": "devices", "type": "quantitative"},
            "y": {"field": "app", "type": "nominal"},
        },
    }
    svg = offline.chart_svg(json.dumps(spec))
    ET.fromstring(svg)  # well-formed XML
    assert "\\x0b" in svg and "\\u202e" in svg
