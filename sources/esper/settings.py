"""The source's settings: each one's default, type and accepted range, checked once.

What each table is (route, key, cursor, columns) is declared beside its resource, in `tables/`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .table import MAX_PAGE_SIZE

# Which command and operation states are terminal: sql/vocabulary/work_states.csv, read through
# `vocabulary.is_terminal` (the SQL models read the same file).

# Defaults of the source's settings (`SOURCES__ESPER__<NAME>` or `[sources.esper]` in config.toml).
LAG_HOURS = 2.0
FULL_SCAN_INTERVAL_DAYS = 7.0
STATUS_BATCH_SIZE = 100
INITIAL_CONCURRENCY = 20
MAX_CONCURRENCY = 64
MAX_RETRIES = 8
REQUEST_TIMEOUT_S = 60.0  # a whole attempt: connect, headers and body
# Seconds one request may wait between its attempts in total (Retry-After, backoff); a longer
# Retry-After fails the request at once, quoting it (docs/decisions.md, "Bounded requests").
MAX_RETRY_WAIT_S = 300.0
HEARTBEAT_START_DAYS = 365.0
# A full scan of more devices is committed in parts of this many devices' apps and feeds (about
# 2,000 requests, 80 s at 25 requests/s): a killed first load loses at most one part (scan/walk.py).
COMMIT_EVERY_DEVICES = 1000
# ... and every full scan commits its devices read so far after this many minutes (0 = never): a
# slow or throttled first load of a small tenant keeps its work when a scheduler kills it.
COMMIT_EVERY_MINUTES = 5.0
DATA_TAP_DEADLINE_S = 900.0
DATA_TAP_STUCK_S = 300.0
DATA_TAP_ROW_LIMIT = 100_000
# Data Tap's quota is the tenant's, shared with its console and other tools: Esper's own reporting
# client budgets 25 requests per rolling hour (submissions and polls alike) and polls after 10,
# 20, then 30 s (live-observations section 18); the last wait repeats.
DATA_TAP_REQUESTS_PER_HOUR = 25
DATA_TAP_POLL_S = (10.0, 20.0, 30.0)


# ------------------------------------------------------------------ accepted values, checked once
# Every setting of the `esper` source with its default and the values it accepts, checked by
# `check_settings` before the first request (the runner calls it; a bad value is exit 2 naming the
# setting). README's configuration table is tested against this declaration.
ENV_PREFIX = "SOURCES__ESPER__"


@dataclass(frozen=True)
class Setting:
    """A setting's type, default and accepted range (inclusive; None = unbounded), and, where
    one is given, `doc`: what it does, in the words README's configuration table and
    .dlt/config.toml's comment both use (tests/pipeline/test_run_settings.py)."""

    kind: type
    default: object
    low: float | None = None
    high: float | None = None
    doc: str = ""

    def accepted(self) -> str:
        if self.kind is bool:
            return "true or false"
        if self.kind is tuple:
            return f"comma-separated seconds, each from {self.low:g} to {self.high:g}"
        if self.kind is dict:
            return (
                "a JSON object of name -> SQL text, or name -> {sql, cursor, key, lag_days, start} "
                "for an incremental query"
            )
        what = "a whole number" if self.kind is int else "a number"
        if self.high is None:
            return f"{what} >= {self.low:g}"
        return f"{what} from {self.low:g} to {self.high:g}"


SETTINGS: dict[str, Setting] = {
    "full_scan": Setting(bool, False),
    "full_scan_interval_days": Setting(float, FULL_SCAN_INTERVAL_DAYS, 0, 3650),
    # Negative would put the watermark in the future: the next runs skip what changed meanwhile.
    "lag_hours": Setting(float, LAG_HOURS, 0, 720),
    "page_size": Setting(int, MAX_PAGE_SIZE, 1, MAX_PAGE_SIZE),
    "status_batch_size": Setting(int, STATUS_BATCH_SIZE, 1, 200),  # ids in one URL
    "heartbeat_start_days": Setting(float, HEARTBEAT_START_DAYS, 0, 3650),
    "initial_concurrency": Setting(int, INITIAL_CONCURRENCY, 1, 256),
    "max_concurrency": Setting(int, MAX_CONCURRENCY, 1, 256),
    "max_retries": Setting(int, MAX_RETRIES, 0, 20),
    "request_timeout": Setting(float, REQUEST_TIMEOUT_S, 0.1, 3600),
    "max_retry_wait_s": Setting(float, MAX_RETRY_WAIT_S, 0, 86400),
    "commit_every_devices": Setting(int, COMMIT_EVERY_DEVICES, 1, 10_000_000),
    "commit_every_minutes": Setting(float, COMMIT_EVERY_MINUTES, 0, 1440),
    "data_tap_queries": Setting(dict, None),
    "data_tap_deadline_s": Setting(float, DATA_TAP_DEADLINE_S, 1, 86400),
    "data_tap_stuck_s": Setting(
        float,
        DATA_TAP_STUCK_S,
        1,
        86400,
        "log a warning for a job still PENDING/RUNNING after this long (never resubmitted: a "
        "submission is sent once)",
    ),
    "data_tap_row_limit": Setting(int, DATA_TAP_ROW_LIMIT, 1, 10_000_000),
    "data_tap_requests_per_hour": Setting(int, DATA_TAP_REQUESTS_PER_HOUR, 2, 100_000),
    "data_tap_poll_s": Setting(tuple, DATA_TAP_POLL_S, 0, 3600),
}


class SettingError(ValueError):
    """A setting's value is outside what it accepts (the message names it and the range)."""


def _is_query(query: object) -> bool:
    """A Data Tap query: SQL text, or `{sql, cursor, key, lag_days, start}` (only `sql` required)."""
    if isinstance(query, str):
        return bool(query.strip())
    if not isinstance(query, dict) or not set(query) <= {
        "sql",
        "cursor",
        "key",
        "lag_days",
        "start",
    }:
        return False
    key = query.get("key", [])
    lag = query.get("lag_days", 0)
    start = query.get("start", "")
    return (
        isinstance(query.get("sql"), str)
        and bool(query["sql"].strip())
        and isinstance(query.get("cursor", ""), str)
        and (
            isinstance(key, str) or (isinstance(key, list) and all(isinstance(k, str) for k in key))
        )
        and isinstance(lag, int | float)
        and not isinstance(lag, bool)
        and lag >= 0
        and isinstance(start, str | int | float)
        and not isinstance(start, bool)
        and ("{cursor}" in query["sql"]) == bool(query.get("cursor"))
    )


def _coerce(name: str, spec: Setting, value: object) -> object:
    """`value` (text from the environment, or a TOML value) as the setting's type."""
    import json
    import math

    bad = SettingError(
        f"{ENV_PREFIX}{name.upper()} (sources.esper.{name}) = {value!r}: expected {spec.accepted()}"
    )
    if spec.kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise bad
    if spec.kind is dict:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise bad from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and _is_query(v) for k, v in value.items()
        ):
            raise bad
        return dict(value)
    if spec.kind is tuple:
        # "10,20,30" from the environment, a TOML list, or one number (`5`, as TOML or dlt
        # reads a lone value): one wait, repeated
        single = isinstance(value, int | float) and not isinstance(value, bool)
        parts = value.split(",") if isinstance(value, str) else [value] if single else value
        try:
            waits = tuple(float(part) for part in parts)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise bad from None
        if not waits or any(
            math.isnan(w) or not spec.low <= w <= spec.high  # type: ignore[operator]
            for w in waits
        ):
            raise bad
        return waits
    if isinstance(value, bool):
        raise bad
    try:
        number = spec.kind(str(value).strip()) if isinstance(value, str) else value
        if spec.kind is int and not float(number).is_integer():
            raise ValueError
        number = spec.kind(number)
    except (TypeError, ValueError):
        raise bad from None
    if math.isnan(number) or number < spec.low or (spec.high is not None and number > spec.high):
        raise bad
    return number


def check_settings(values: dict[str, object]) -> dict[str, object]:
    """The given settings (names of `SETTINGS`; others pass through) typed and range-checked.

    Raises:
        SettingError: the first value outside what its setting accepts, naming the setting,
            its environment variable and the accepted range.
    """
    checked = dict(values)
    for name, value in values.items():
        if name in SETTINGS and value is not None:
            checked[name] = _coerce(name, SETTINGS[name], value)
    # a setting looked up but not configured anywhere is present with the value None
    low = checked.get("initial_concurrency") or INITIAL_CONCURRENCY
    high = checked.get("max_concurrency") or MAX_CONCURRENCY
    if low > high:  # type: ignore[operator]
        raise SettingError(
            f"{ENV_PREFIX}INITIAL_CONCURRENCY ({low}) must not exceed "
            f"{ENV_PREFIX}MAX_CONCURRENCY ({high})"
        )
    return checked
