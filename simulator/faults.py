"""Fault injection: per-route-glob, seeded, with a maximum number of firings.

A fault is a dict ``{"kind", "route" (glob on the path after /api; default all), "probability"
(default 1.0), "times" (max firings; None = unlimited), ...kind arguments}``. Kinds:
``latency`` (ms, jitter_ms), ``rate_limit`` (rps, burst, retry_after), ``status`` (status),
``drop``, ``malformed``, ``slow`` (seconds), ``insert_during_paging`` (count), ``drift``
(variant: ``rename`` field -> to, ``null_list`` field (default ``results``), ``envelope``, ``as_text``, ``value`` field -> value):
a 200 answer changes shape or serves a value the loader cannot read, as a real API may after an
upgrade (see `apply_drift`).

Next-link faults (live §12: Esper's own client rewrites such links before following them):
``next_http``: the ``next`` link of a list answer says ``http://`` whatever the request's
scheme (``scheme``: another one, e.g. ``https`` so that a loopback test over plain http sees a
link whose scheme differs from its configured one). ``next_foreign_host``: the ``next`` link
names another host of the same service, ``link_host`` (``host[:port]``, the link's port kept
when none is given; default: ``127.0.0.1`` and ``localhost`` swapped, or ``other-`` before the
first label of any other host). The link still works (a client that follows it unchanged gets
the right page, and sends its key to that host); see `rewrite_next`.

``query_canceled``: a Data Tap query polled through a matching route is canceled (the service
cancels it, as Databricks may); from then on its status is ``CANCELED``, with no result and no
error message. Route it at ``/data-tap/v0/queries/*``.

``legacy_feed_android_only``: the legacy event feed
(``/enterprise/{eid}/device/{id}/download/eventfeed/``) answers 400 for every device that is not
Android. Inferred, not recorded (live-observations §21, §25: the legacy routes serve Android
devices; what the real API answers for others is not observed), so it is a fault, not a default.
Route it at ``/enterprise/*/device/*/download/eventfeed/*``.

Time faults (issue 14: cursors must come from the data, not from a clock):
``clock_skew`` (hours, may be negative): the ``Date`` header runs that far ahead of the data, on
every answer (route and probability do not apply). ``late_events`` (share of live devices,
default 0.02; events per device, default 3; days, default 3): after every clock advance, some
devices come back online and upload events stamped up to ``days`` in the past (the upload moves
their ``updated_at`` and ``last_seen`` to the upload time; the events keep their old
``created_on`` and get new ids). ``out_of_order``: on the matching offset lists, the last item of
every page trades places with the first item of the next page, so the pages of a newest-first
list are not in order across their boundaries (see `swap_page_edges`). ``reversed``: on the
matching lists, each page's items come in reverse order (a list whose order the spec does not
promise, such as a pipeline's stages: `reverse_page`).
"""

from __future__ import annotations

import fnmatch
import math
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

KINDS = frozenset(
    {
        "latency",
        "rate_limit",
        "status",
        "legacy_feed_android_only",
        "drop",
        "malformed",
        "slow",
        "insert_during_paging",
        "drift",
        "clock_skew",
        "late_events",
        "out_of_order",
        "reversed",
        "next_http",
        "next_foreign_host",
        "query_canceled",
    }
)
WORLD_KINDS = frozenset({"clock_skew", "late_events"})  # act on the clock or data, not a request
DRIFT_VARIANTS = frozenset({"rename", "null_list", "envelope", "as_text", "value"})


@dataclass(slots=True)
class Fault:
    """One configured fault and its firing count."""

    kind: str
    route: str = "*"
    probability: float = 1.0
    times: int | None = None
    args: dict[str, Any] = field(default_factory=dict)
    fired: int = 0
    tokens: float = 0.0
    stamp: float = 0.0

    def matches(self, path: str) -> bool:
        """Whether the fault applies to ``path`` (after /api)."""
        return fnmatch.fnmatchcase(path, self.route)

    def spent(self) -> bool:
        """Whether the fault has fired its maximum number of times."""
        return self.times is not None and self.fired >= self.times


def parse(spec: dict[str, Any]) -> Fault:
    """Validate a fault dict.

    Raises:
        ValueError: on an unknown kind or a bad argument.
    """
    if not isinstance(spec, dict):
        raise ValueError("a fault is a JSON object")
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind not in KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    route = str(spec.pop("route", None) or "*")
    probability = float(spec.pop("probability", 1.0))
    if not 0.0 <= probability <= 1.0:
        raise ValueError("probability must be within [0, 1]")
    times = spec.pop("times", None)
    if times is not None:
        times = int(times)
    if kind == "status" and int(spec.get("status", 500)) < 400:
        raise ValueError("status faults need an error status (>= 400)")
    if kind == "rate_limit" and float(spec.get("rps", 0)) <= 0:
        raise ValueError("rate_limit needs rps > 0")
    if kind == "drift":
        _check_drift(spec)
    if kind == "clock_skew" and not isinstance(spec.get("hours"), int | float):
        raise ValueError("clock_skew needs 'hours' (a number, negative = behind the data)")
    if kind == "late_events" and not (
        0 < float(spec.get("share", 0.02)) <= 1
        and int(spec.get("events", 3)) >= 1
        and float(spec.get("days", 3)) > 0
    ):
        raise ValueError("late_events needs 0 < share <= 1, events >= 1 and days > 0")
    fault = Fault(kind, route, probability, times, spec)
    if kind == "rate_limit":
        fault.tokens = float(spec.get("burst") or spec["rps"])
    return fault


@dataclass(slots=True)
class Decision:
    """What the faults decided for one request."""

    delay: float = 0.0
    status: int | None = None
    retry_after: int | None = None
    drop: bool = False
    malformed: bool = False
    insert: int = 0
    drift: list[dict[str, Any]] = field(default_factory=list)
    disorder: bool = False
    reverse: bool = False
    next_scheme: str | None = None  # next_http
    next_host: str | None = None  # next_foreign_host ("" = the default other host)
    cancel_query: bool = False  # query_canceled
    android_only_feed: bool = False  # legacy_feed_android_only


class Faults:
    """The active fault list, consulted by the app on every API request."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"{seed}:faults")
        self.late_rng = random.Random(f"{seed}:late_events")
        self.lock = threading.Lock()
        self.items: list[Fault] = []

    def set(self, specs: list[dict[str, Any]]) -> None:
        """Replace the active faults (validates them all first)."""
        parsed = [parse(s) for s in specs]
        now = time.monotonic()
        for f in parsed:
            f.stamp = now
        with self.lock:
            self.items = parsed

    def clear(self) -> None:
        """Remove every fault."""
        with self.lock:
            self.items = []

    def describe(self) -> list[dict[str, Any]]:
        """The active faults as dicts, with how often each fired."""
        with self.lock:
            return [
                {
                    "kind": f.kind,
                    "route": f.route,
                    "probability": f.probability,
                    "times": f.times,
                    "fired": f.fired,
                    **f.args,
                }
                for f in self.items
            ]

    def decide(self, path: str, offset_paging: bool) -> Decision:
        """Roll every matching fault for a request to ``path``.

        Args:
            path: the request path after /api.
            offset_paging: whether the request asks an offset list for a page after the
                first (where ``insert_during_paging`` fires).
        """
        d = Decision()
        if not self.items:
            return d
        with self.lock:
            for f in self.items:
                if f.kind in WORLD_KINDS or f.spent() or not f.matches(path):
                    continue
                if f.kind == "rate_limit":
                    self._rate_limit(f, d)
                    continue
                if f.kind == "insert_during_paging" and not offset_paging:
                    continue
                if f.probability < 1.0 and self.rng.random() >= f.probability:
                    continue
                f.fired += 1
                self._apply(f, d)
        return d

    def _rate_limit(self, f: Fault, d: Decision) -> None:
        rps = float(f.args["rps"])
        burst = float(f.args.get("burst") or rps)
        now = time.monotonic()
        f.tokens = min(burst, f.tokens + (now - f.stamp) * rps)
        f.stamp = now
        if f.tokens >= 1.0:
            f.tokens -= 1.0
            return
        if f.probability < 1.0 and self.rng.random() >= f.probability:
            return
        f.fired += 1
        d.status = d.status or 429
        if f.args.get("retry_after", True):
            d.retry_after = max(1, math.ceil((1.0 - f.tokens) / rps))

    def _apply(self, f: Fault, d: Decision) -> None:
        a = f.args
        if f.kind == "latency":
            jitter = float(a.get("jitter_ms", 0))
            d.delay += (float(a.get("ms", 0)) + self.rng.uniform(-jitter, jitter)) / 1000.0
            d.delay = max(d.delay, 0.0)
        elif f.kind == "slow":
            d.delay += float(a.get("seconds", 5.0))
        elif f.kind == "status":
            d.status = d.status or int(a.get("status", 500))
        elif f.kind == "drop":
            d.drop = True
        elif f.kind == "malformed":
            d.malformed = True
        elif f.kind == "insert_during_paging":
            d.insert += int(a.get("count", 1))
        elif f.kind == "drift":
            d.drift.append(a)
        elif f.kind == "out_of_order":
            d.disorder = True
        elif f.kind == "reversed":
            d.reverse = True
        elif f.kind == "next_http":
            d.next_scheme = str(a.get("scheme") or "http")
        elif f.kind == "next_foreign_host":
            d.next_host = str(a.get("link_host") or "")
        elif f.kind == "query_canceled":
            d.cancel_query = True
        elif f.kind == "legacy_feed_android_only":
            d.android_only_feed = True

    # -- time faults ---------------------------------------------------------------------

    def date_offset(self) -> int:
        """Seconds the ``Date`` header runs ahead of the data (``clock_skew``; 0 without)."""
        with self.lock:
            return sum(round(float(f.args["hours"]) * 3600) for f in self.items
                       if f.kind == "clock_skew")  # fmt: skip

    def after_advance(self, fleet: Any, t0: int, t1: int) -> None:
        """Run the ``late_events`` faults once the fleet's clock moved from ``t0`` to ``t1``."""
        with self.lock:
            late = [f for f in self.items if f.kind == "late_events" and not f.spent()]
            for f in late:
                f.fired += 1
                add_late_events(fleet, self.late_rng, t1, f.args)


def add_late_events(fleet: Any, rng: random.Random, now: int, args: dict[str, Any]) -> int:
    """Devices come back online at ``now`` and upload events stamped in the past.

    Each chosen device (reachable, seen before) gets ``events`` events stamped up to ``days``
    before ``now`` (never before the device was created), with new ids as the server stores
    them; its ``updated_at`` and ``last_seen`` move to ``now``, as the upload changes the record.

    Returns:
        How many events were added.
    """
    from esper_warehouse.simulator import (
        catalog as C,  # the fleet's vocabulary (kept out of the fault parsing)
    )

    live = [i for i in fleet.live() if not fleet.dark[i] and fleet.last_seen[i] >= 0]
    if not live:
        return 0
    chosen = rng.sample(
        live, min(len(live), max(1, round(len(live) * float(args.get("share", 0.02)))))
    )
    span = max(1, round(float(args.get("days", 3)) * 86400))
    added = 0
    for i in sorted(chosen):
        for _ in range(int(args.get("events", 3))):
            ts = max(fleet.created[i], now - rng.randint(3600, max(3600, span)))
            fleet.add_event(i, ts, C.EV_CHANGED)
            added += 1
        fleet.updated[i] = max(now, fleet.updated[i] + 1)
        fleet.last_seen[i] = max(fleet.last_seen[i], now)
    fleet.version += 1
    return added


def swap_page_edges(payload: Any, offset: int, limit: int, page_at: Any) -> Any:
    """A page of an offset list whose edges traded places with its neighbours' (a copy).

    The last item of every page and the first item of the next page swap, on both sides of each
    boundary, so the list as a whole holds every item once but is out of order across pages.

    Args:
        payload: this page's answer.
        offset, limit: this page's position.
        page_at: ``offset -> the records of the page at that offset`` (the handler, re-run).
    """
    payload = orjson.loads(orjson.dumps(payload))
    envelope = _envelope_of(payload)
    results = envelope.get("results") if isinstance(envelope, dict) else None
    if not results or limit < 2:  # (pages of one item would need a cycle, not swaps)
        return payload
    if offset > 0:
        previous = page_at(max(0, offset - limit))
        if previous:
            results[0] = previous[-1]
    if envelope.get("next"):
        following = page_at(offset + limit)
        if following:
            results[-1] = following[0]
    return payload


# -- next links: another scheme or host -------------------------------------------------------


def other_host(netloc: str) -> str:
    """The default "other host of the same service" for ``netloc`` (``host[:port]``)."""
    host, sep, port = netloc.partition(":")
    swapped = {"127.0.0.1": "localhost", "localhost": "127.0.0.1"}.get(host, f"other-{host}")
    return f"{swapped}{sep}{port}"


def rewrite_next(payload: Any, scheme: str | None, host: str | None) -> Any:
    """``payload`` with its ``next`` link (top level or under ``content``) on ``scheme`` and/or
    ``host`` (``""``: `other_host` of the link's own host). Other keys are left alone."""
    from urllib.parse import urlsplit, urlunsplit

    envelope = _envelope_of(payload)
    link = envelope.get("next") if isinstance(envelope, dict) else None
    if not isinstance(link, str):
        return payload
    parts = urlsplit(link)
    netloc = parts.netloc if host is None else (host or other_host(parts.netloc))
    if host and ":" not in host and parts.port:
        netloc = f"{host}:{parts.port}"  # a host without a port keeps the link's port
    envelope["next"] = urlunsplit(parts._replace(scheme=scheme or parts.scheme, netloc=netloc))
    return payload


# -- drift: a 200 answer whose shape changed ----------------------------------------------------


def _check_drift(spec: dict[str, Any]) -> None:
    variant = spec.get("variant")
    if variant not in DRIFT_VARIANTS:
        raise ValueError(f"drift needs a variant: {', '.join(sorted(DRIFT_VARIANTS))}")
    if variant == "rename" and not (
        isinstance(spec.get("field"), str) and isinstance(spec.get("to"), str)
    ):
        raise ValueError("a rename drift needs 'field' (dotted path) and 'to' (new key)")
    if variant == "as_text" and not (
        isinstance(spec.get("field"), str) and isinstance(spec.get("names"), dict)
    ):
        raise ValueError("an as_text drift needs 'field' (dotted path) and 'names' {value: text}")
    if variant == "value" and not (isinstance(spec.get("field"), str) and "value" in spec):
        raise ValueError("a value drift needs 'field' (dotted path) and 'value' (any JSON value)")


def apply_drift(payload: Any, drifts: list[dict[str, Any]]) -> Any:
    """The answer ``payload`` with every drift of the request applied, in order (a copy).

    * ``rename``: in every record (list item, or the one object of an item route), the key at
      the dotted path ``field`` becomes ``to`` (``updated_at`` -> ``updatedAt``).
    * ``null_list``: ``results`` becomes null, whatever the count (``field`` names another
      record field to null instead, e.g. ``tags``).
    * ``envelope``: the content envelope becomes the legacy one (``{count, next, previous,
      results}``), and a ``{content: {...}}`` item becomes the bare object.
    * ``as_text``: the value at ``field`` is served as text: ``names`` maps a value (as a string)
      to its text, other values become their string (``state: 60`` -> ``"INACTIVE"``; Esper's
      own support tool reads text device states, docs/spec/live-observations.md section 22).
    * ``value``: the value at ``field`` becomes ``value`` (any JSON value: a year-0 timestamp, a
      word where a number was), in every record, or only in those whose ``id`` is one of
      ``ids``: a value the API may serve that the loader cannot read.
    """
    payload = orjson.loads(orjson.dumps(payload))  # handlers may hand out the world's own dicts
    for spec in drifts:
        variant = spec["variant"]
        if variant == "envelope":
            payload = _legacy_envelope(payload)
        elif variant == "null_list" and spec.get("field", "results") == "results":
            envelope = _envelope_of(payload)
            if isinstance(envelope, dict) and "results" in envelope:
                envelope["results"] = None
        else:
            *parents, leaf = str(spec.get("field")).split(".")
            for record in _records(payload):
                node: Any = record
                for name in parents:
                    node = node.get(name) if isinstance(node, dict) else None
                if variant == "value":
                    ids = spec.get("ids")
                    if isinstance(node, dict) and (
                        ids is None or str(record.get("id")) in map(str, ids)
                    ):
                        node[leaf] = spec["value"]
                elif isinstance(node, dict) and leaf in node:
                    if variant == "rename":
                        node[spec["to"]] = node.pop(leaf)
                    elif variant == "as_text":
                        node[leaf] = spec["names"].get(str(node[leaf]), str(node[leaf]))
                    else:
                        node[leaf] = None
    return payload


def reverse_page(payload: Any) -> Any:
    """A list answer (a copy) whose page holds the same items in reverse order."""
    payload = orjson.loads(orjson.dumps(payload))
    envelope = _envelope_of(payload)
    if isinstance(envelope, dict) and isinstance(envelope.get("results"), list):
        envelope["results"].reverse()
    return payload


def _envelope_of(payload: Any) -> Any:
    content = payload.get("content") if isinstance(payload, dict) else None
    return content if isinstance(content, dict) else payload


def _records(payload: Any) -> list[dict[str, Any]]:
    if isinstance(payload, list):  # a bare array (authz2's role scopes)
        return [r for r in payload if isinstance(r, dict)]
    envelope = _envelope_of(payload)
    for name in ("results", "roles"):  # `roles`: the linkless `{count, roles}` list
        if isinstance(envelope, dict) and name in envelope:
            return [r for r in envelope[name] or [] if isinstance(r, dict)]
    return [envelope] if isinstance(envelope, dict) else []


def _legacy_envelope(payload: Any) -> Any:
    content = payload.get("content") if isinstance(payload, dict) else None
    if not isinstance(content, dict):
        return payload
    if "results" not in content:
        return content
    return {
        "count": content.get("count"),
        "next": content.get("next"),
        "previous": content.get("prev", content.get("previous")),
        "results": content["results"],
    }
