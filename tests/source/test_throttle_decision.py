"""One throttle decision (issue 44, item 3): an answer goes to `policy.decide`, which returns what
to do (sources/esper/http/policy.py); the client sleeps it.

The first test follows a real 429 from a loopback server's socket to the client's sleep and
counts the files whose code runs on the way; the others read the decisions themselves.
"""

from __future__ import annotations

import ast
import logging
import random
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import pytest
from esper_warehouse.sources.esper.http import (
    EsperAPIError,
    EsperAuthError,
    EsperClient,
    EsperUnavailableError,
    redact,
)
from esper_warehouse.sources.esper.http import policy as policy_module
from esper_warehouse.sources.esper.http.origin import Origin
from esper_warehouse.sources.esper.http.pacing import RatePacer
from esper_warehouse.sources.esper.http.policy import Decision, Facts, Rules, Tries, decide

from tests.source.test_client import BASE, EID, KEY, Reply, Seen

HTTP = Path(policy_module.__file__).resolve().parent
ROUTE = "GET /v2/devices/"


def test_a_429_from_the_socket_to_the_sleep_crosses_three_files(
    serve: Callable[[Callable[[Seen], Reply]], Any],
) -> None:
    """From the moment the 429 is read off the socket (`_send` returns) to the client's sleep:
    the code that runs is in client.py, policy.py and the pace's room (pacing.py, with its
    weather judgement's evidence in weather.py, and limiter.py), plus `errors.redact`, handed to the decision as a
    value; policy.py never calls into client.py."""
    replies = [Reply(429, {"message": f"slow down, {KEY}"}, {"Retry-After": "2"}), Reply()]
    server = serve(lambda seen: replies.pop(0) if len(replies) > 1 else replies[0])
    calls: list[tuple[str, str, str]] = []  # (file called, function, file calling)
    counted: list[tuple[str, str, str]] = []  # the client's bookkeeping: counters.py
    slept: list[float] = []
    following = {"on": False, "done": False}

    def sleep(seconds: float) -> None:
        following["on"], following["done"] = False, True
        slept.append(seconds)

    def profile(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if following["done"] or event not in ("call", "return"):
            return
        here = Path(code.co_filename).resolve()
        if event == "return" and code.co_name == "_send" and here.name == "client.py":
            following["on"] = True  # the answer is off the socket
        elif event == "call" and following["on"] and here.parent == HTTP:
            caller = frame.f_back.f_code.co_filename if frame.f_back else ""
            seen = counted if here.name == "counters.py" else calls
            seen.append((here.name, code.co_name, Path(caller).name))

    with EsperClient(server.url + "/api", KEY, EID, sleep=sleep) as client:
        sys.setprofile(profile)
        try:
            assert client.get("/v2/devices/") == {"ok": True}
        finally:
            sys.setprofile(None)
    assert slept == [pytest.approx(2, abs=0.1)], "the 429's Retry-After was slept"
    # the pace's room: requests a second, the weather judgement's evidence, requests in flight
    rooms = {"weather.py": "pacing.py", "limiter.py": "pacing.py"}
    files = {rooms.get(called, called) for called, _, _ in calls}
    assert files - {"errors.py"} == {"client.py", "policy.py", "pacing.py"}, calls
    assert {name for called, name, _ in calls if called == "errors.py"} <= {"redact"}, calls
    back = [(name, caller) for called, name, caller in calls if called == "client.py"]
    assert all(caller == "client.py" for _, caller in back), f"policy calls the client: {back}"
    assert counted and {caller for _, _, caller in counted} <= {"client.py", "counters.py"}, counted


def test_the_policy_does_not_import_the_client_not_even_for_types() -> None:
    tree = ast.parse(Path(policy_module.__file__).read_text())
    imported = {
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level
    }
    assert "client" not in imported and "errors" in imported, imported


# --------------------------------------------------------------------------- the decisions


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _decide(
    answer: httpx.Response | Exception,
    tries: Tries | None = None,
    *,
    pacer: RatePacer | None = None,
    proven: bool = False,
    reserved_at: float = 0.0,
    max_wait: float = 300.0,
) -> Decision:
    # A client built with the key registers it for `redact`, as every run does.
    EsperClient(BASE, KEY, EID).close()
    return decide(
        ROUTE,
        answer,
        tries or Tries(),
        rules=Rules(8, 0.5, 60.0, max_wait, random.Random(7)),
        facts=Facts(Origin(BASE, EID), "SOURCES__ESPER__API_KEY", proven, redact),
        pacer=pacer,
        reserved_at=reserved_at,
    )


def _throttled(retry_after: str, message: str = "") -> httpx.Response:
    body = {"message": message} if message else None
    return httpx.Response(429, json=body, headers={"Retry-After": retry_after})


def test_a_429_that_cut_the_pace_holds_every_request_for_its_retry_after() -> None:
    clock = Clock()
    pacer = RatePacer(clock)
    for _ in range(60):  # 3 s of answers at 20/s: a rate to learn from (the first cut waits 2 s)
        clock.now += 0.05
        pacer.reserve()
        pacer.cuts_pace(False, clock.now)
    decision = _decide(_throttled("3", f"over quota for {KEY}"), pacer=pacer, reserved_at=clock.now)
    assert (decision.then, decision.wait, decision.holds_all) == ("retry", 3.0, True)
    assert decision.limiter == "throttled" and decision.level == logging.WARNING
    assert "the API asked to wait 3 s (Retry-After): 429 number 1 then" in decision.why
    assert KEY not in decision.why and "[redacted]" in decision.why
    assert decision.tries == Tries(retries=0, throttled=1, waited=0.0)  # slept as a cooldown
    # The same overshoot again (a request paced before that cut): it waits for itself alone.
    again = _decide(_throttled("3"), decision.tries, pacer=pacer, reserved_at=clock.now - 1)
    assert (again.then, again.holds_all, again.limiter) == ("retry", False, "neutral")
    assert again.level == logging.DEBUG and again.tries == Tries(0, 2, 3.0)


def test_a_retry_after_beyond_what_the_request_has_left_gives_up_quoting_the_server() -> None:
    decision = _decide(_throttled("30"), Tries(0, 4, 290.0))
    assert decision.then == "raise" and isinstance(decision.error, EsperAPIError)
    assert "asked to wait 30 s (Retry-After)" in str(decision.error)
    assert "the 10 s left of the 300 s a request may wait" in str(decision.error)


def test_a_503_backs_off_until_the_retries_are_spent() -> None:
    answer = httpx.Response(503, json={"message": "maintenance"})
    first = _decide(answer)
    assert first.then == "retry" and 0 <= first.wait <= 0.5 and not first.holds_all
    assert first.why.startswith(f"{ROUTE}: HTTP 503: maintenance; retry 1/8 in ")
    last = _decide(answer, Tries(retries=8, throttled=2))
    assert last.then == "raise" and isinstance(last.error, EsperAPIError)
    assert str(last.error) == f"{ROUTE} failed after 11 attempts; last: HTTP 503: maintenance"


def test_what_a_403_means_depends_on_what_the_run_has_proven() -> None:
    refused = httpx.Response(403)
    before = _decide(refused, proven=False).error
    assert isinstance(before, EsperAuthError) and "SOURCES__ESPER__API_KEY" in str(before)
    after = _decide(refused, proven=True).error
    assert isinstance(after, EsperUnavailableError), after


def test_a_dropped_connection_is_retried_and_a_bug_is_raised_unchanged() -> None:
    dropped = _decide(httpx.RemoteProtocolError(f"peer closed ({KEY})"))
    assert dropped.then == "retry" and dropped.status is None
    assert KEY not in dropped.why and "connection failed (RemoteProtocolError" in dropped.why
    bug = ValueError("not the network's")
    assert _decide(bug).error is bug


def test_a_429_whose_retries_are_answered_is_the_requests_and_cuts_no_pace() -> None:
    """Each path refused once (429), then answered: `decide` tells the pacer which answers are
    retries of a refused request (`Tries.throttled`), so half the answers refused is read as
    the requests' doing, not the pace's: after the first second, no 429 holds every request
    and the pace is never set (told nothing, the pacer cut twice, to 2.2/s, before calling
    the refusals weather)."""
    clock = Clock()
    pacer = RatePacer(clock)
    held, paces = [], []
    for _ in range(40):
        clock.now += 0.05
        pacer.reserve()
        refused = _decide(_throttled("1"), pacer=pacer, reserved_at=clock.now)
        clock.now += 0.05
        pacer.reserve()
        _decide(httpx.Response(200, json={}), refused.tries, pacer=pacer, reserved_at=clock.now)
        if clock.now > 1.0:
            held.append(refused.holds_all)
            paces.append(pacer.rate)
    assert not any(held) and paces == [None] * len(paces), (held, paces)
