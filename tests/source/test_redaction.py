"""Redact before cutting (issue 32, item 6): a server text that quotes the API key is shortened
for people only after the key is taken out, so no cut keeps a piece of it.

The client quotes an error body's message (cut at 300 characters) and the start of a body that
is not JSON (cut at 60). A key that straddled the cut was cut first and no longer matched: 36 to
39 of its 40 characters reached the logs, the errors and the run record. Here a loopback server
places the key so that each cut position splits it, for every kind of answer that is quoted.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from esper_warehouse.sources.esper.http import EsperClient, EsperError
from esper_warehouse.sources.esper.http.errors import REDACTED, keep_secret, redact

from tests.source.test_client import EID, LoopbackServer, Reply, Seen

KEY = "esk_live_Q7mZ2pX9vR4tL8nW3cJ6hB1yF5dK0sGa"  # 40 characters, as Esper's keys
FRAGMENT = 8  # no run of this many of the key's characters may reach a person
CUT = {"message": 300, "body": 60}  # where the client shortens each kind of quoted text


def key_fragments(text: str, key: str = KEY) -> list[str]:
    """The pieces of `key`, `FRAGMENT` characters or longer, found in `text`."""
    return [
        key[i : i + FRAGMENT]
        for i in range(len(key) - FRAGMENT + 1)
        if key[i : i + FRAGMENT] in text
    ]


def straddling(cut: int) -> list[int]:
    """Every start of the key that leaves 1 to 39 of its characters before `cut`."""
    return [cut - inside for inside in range(1, len(KEY))]


def quoting(kind: str, start: int, status: int) -> Reply:
    """An answer quoting the key from character `start` of the text the client shortens."""
    text = "x" * start + KEY + " is not allowed here"
    if kind == "body":
        return Reply(status, raw=text.encode())
    return Reply(status, {"message": text, "code": status})


ANSWERS = [("message", 400), ("message", 404), ("message", 503), ("message", 429), ("body", 200)]


@pytest.mark.parametrize(("kind", "status"), ANSWERS)
def test_no_cut_leaves_a_piece_of_the_key(
    serve: Any, caplog: pytest.LogCaptureFixture, kind: str, status: int
) -> None:
    starts = straddling(CUT[kind])
    if status == 429:
        # a throttled request is tried 101 times before its error quotes the message: the first,
        # middle and last positions (its text is `api_message`'s, as for the 400, 404 and 503)
        starts = starts[::19]
    current: dict[str, int] = {}

    def respond(seen: Seen) -> Reply:
        return quoting(kind, current["start"], status)

    server: LoopbackServer = serve(respond)
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    # no retry: each request's answer is quoted once, in the final error (and its warning)
    options: dict[str, Any] = {"sleep": lambda s: None, "timeout": 5.0, "max_retries": 0}
    with EsperClient(server.url + "/api", KEY, EID, **options) as client:
        for start in starts:
            current["start"] = start
            with pytest.raises(EsperError) as caught:
                client.get("/v2/devices/x/")  # a per-record route: a 404 is not tenant-level
            texts.append(str(caught.value))

    assert len(texts) == len(starts)
    assert [t for t in texts if key_fragments(t)] == []
    assert key_fragments(caplog.text) == []
    assert all("x" * 20 in t for t in texts), "the server's text is still quoted"
    assert "[redacted]" in texts[-1], "a key well inside the cut is replaced, not dropped"


@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_a_key_wrapped_in_base64_is_taken_out_wherever_it_starts(encode: Any) -> None:
    """A server that wraps the key in an opaque token (a page cursor, a Basic header) echoes it
    in base64: whatever bytes come before and after it, what is left once it is redacted is
    only the neighbours' own characters, and decodes to no piece of the key."""
    keep_secret(KEY)
    for before in ("", "a", "ab", "abc"):
        for after in ("", "x", "|eyJzdiI6W10ifQ=="):
            token = encode((before + KEY + after).encode()).decode()
            redacted = redact(f"invalid cursor {token!r}")
            assert REDACTED in redacted, (before, after)
            left = redacted.removeprefix("invalid cursor '").removesuffix("'").split(REDACTED)
            assert len(left) == 2 and len(left[0]) <= 4 and len(left[1]) <= len(after) * 4 // 3 + 4
