"""The source's settings, each declared once: `EsperSourceConfiguration`, a dlt `@configspec`.

One field per setting: its name, type, default, accepted range and one line of what it does
(`setting(...)`). Everything else is derived from it: the source's signature
(`esper(config: EsperSourceConfiguration = dlt.config.value)`), the check (`on_resolved`, run by
dlt's own resolution), the environment variables (`SOURCES__ESPER__<NAME>`), `doctor`'s view,
the `[sources.esper]` block of `.dlt/config.toml` and docs/reference/settings.md
(`pipelines/tools/settings_docs.py`). tests/source/test_settings.py fails when a setting
is declared, defaulted or tabled anywhere else.

What each table is (route, key, cursor, columns) is declared beside its resource, in `tables/`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Optional  # noqa: UP035 - dlt reads these annotations at runtime

from dlt.common.configuration import configspec, resolve_configuration
from dlt.common.configuration.exceptions import ConfigValueCannotBeCoercedException
from dlt.common.configuration.resolve import inject_section
from dlt.common.configuration.specs import BaseConfiguration
from dlt.common.configuration.specs.base_configuration import is_secret_hint
from dlt.common.configuration.specs.config_section_context import ConfigSectionContext
from dlt.common.typing import TSecretStrValue, extract_inner_type, is_optional_type

from .table import MAX_PAGE_SIZE

# Where dlt looks for the source's settings: the sections of `@dlt.source(name="esper")` in the
# module `esper` (tests/source/test_settings.py holds them to dlt's own).
SECTIONS = ("sources", "esper", "esper")
ENV_PREFIX = "__".join(SECTIONS[:2]).upper() + "__"  # SOURCES__ESPER__
_ACCEPTS = "esper_accepts"  # the key of a field's `Accepts` in its dataclass metadata


@dataclass(frozen=True)
class Accepts:
    """What a setting accepts beyond its type (a range, inclusive; None = unbounded) and what it
    does, in one line. `kind`: the type the check gives a value whose annotation cannot say it."""

    doc: str
    low: float | None = None
    high: float | None = None
    kind: type | None = None


def setting(
    default: Any,
    doc: str,
    low: float | None = None,
    high: float | None = None,
    kind: type | None = None,
) -> Any:
    """A field of `EsperSourceConfiguration`: its default, meaning and accepted range."""
    return field(default=default, metadata={_ACCEPTS: Accepts(doc, low, high, kind)})


@configspec
class EsperSourceConfiguration(BaseConfiguration):
    """Every setting of the `esper` source (`[sources.esper]` in .dlt/*.toml, or
    `SOURCES__ESPER__<NAME>`), checked before the first request (`on_resolved`)."""

    api_key: TSecretStrValue = setting(None, "the Esper API key")
    base_url: str = setting(None, "`https://<tenant>-api.esper.cloud/api`")
    enterprise_id: str = setting(
        None,
        "the tenant's enterprise UUID (spaces around it are dropped; empty, or anything but "
        "letters, digits, `-` and `_`, is refused before any request, exit 2)",
    )
    full_scan: bool = setting(
        False, "full scans of every list, census of devices (`run --full` sets it for its run)"
    )
    full_scan_interval_days: float = setting(7.0, "a full scan at least this often", 0, 3650)
    # A full scan of more devices is committed in parts of this many devices' apps and feeds
    # (about 2,000 requests, 80 s at 25 requests/s): a killed first load loses at most one part.
    commit_every_devices: int = setting(
        1000,
        "a full scan of more devices is committed in parts of this many devices' apps and feeds: "
        "a killed first load goes on from its last part",
        1,
        10_000_000,
    )
    commit_every_minutes: float = setting(
        5.0,
        "a full scan also commits the devices read so far after this many minutes (0 = never): a "
        "slow or throttled first load killed by a scheduler goes on from its last part too",
        0,
        1440,
    )
    # Negative would put the watermark in the future: the next runs skip what changed meanwhile.
    lag_hours: float = setting(
        2.0, "re-read this much before each watermark (late updates)", 0, 720
    )
    page_size: int = setting(
        MAX_PAGE_SIZE, "items per list request (the API's maximum)", 1, MAX_PAGE_SIZE
    )
    status_batch_size: int = setting(
        100, "command request ids per status call (ids in one URL)", 1, 200
    )
    heartbeat_start_days: float = setting(
        365.0, "first run: how far back the last-seen window starts", 0, 3650
    )
    initial_concurrency: int = setting(
        20,
        "requests in flight at the start (adapts up on success, halves when a 429 cuts the pace)",
        1,
        256,
    )
    max_concurrency: int = setting(64, "upper bound of requests in flight", 1, 256)
    max_retries: int = setting(
        8, "attempts per request on 429, 5xx, timeouts, dropped connections", 0, 20
    )
    request_timeout: float = setting(
        60.0, "seconds per attempt: connect, headers and body", 0.1, 3600
    )
    # docs/decisions.md, "Bounded requests"
    max_retry_wait_s: float = setting(
        300.0,
        "seconds one request may wait between its attempts in total (Retry-After, backoff); a "
        "longer `Retry-After` fails the run at once (exit 3), quoting the API's value",
        0,
        86400,
    )
    data_tap_queries: Optional[Dict[str, Any]] = setting(  # noqa: UP006, UP045 - read by dlt
        None,
        "name -> SQL (a snapshot, replaced each run) or name -> `{sql, cursor, key, lag_days, "
        "start}` (incremental, history kept; `key` defaults to the cursor, `lag_days` to 1, "
        "`start` to `DATE'1970-01-01'`); each loads into `esper.data_tap__<name>`",
    )
    data_tap_deadline_s: float = setting(
        900.0, "give up on a Data Tap query after this long", 1, 86400
    )
    data_tap_stuck_s: float = setting(
        300.0,
        "log a warning for a job still PENDING/RUNNING after this long (never resubmitted: a "
        "submission is sent once)",
        1,
        86400,
    )
    data_tap_row_limit: int = setting(
        100_000,
        "rows per query; a truncated result skips the query's table (partial run, exit 6)",
        1,
        10_000_000,
    )
    # Data Tap's quota is the tenant's, shared with its console and other tools: Esper's own
    # reporting client budgets 25 requests per rolling hour (submissions and polls alike) and
    # polls after 10, 20, then 30 s (live-observations section 18); the last wait repeats.
    # "10,20,30" from the environment, a TOML list, or one number: dlt cannot type all three, so
    # the annotation is Any and the check (`kind`) makes it a tuple.
    data_tap_poll_s: Any = setting(
        (10.0, 20.0, 30.0),
        "seconds to wait before each poll of a Data Tap job; the last repeats (a 40 s job costs 1 "
        "submission and 3 polls); one value (`5`) waits that long before every poll",
        0,
        3600,
        kind=tuple,
    )
    data_tap_requests_per_hour: int = setting(
        25,
        "Data Tap requests (submissions and polls) any rolling hour may hold, across runs; a "
        "query that would need more is skipped with the later ones (partial), never waited for. "
        "The tenant's quota is shared with its console: Esper's own reporting client budgets 25",
        2,
        100_000,
    )

    def on_resolved(self) -> None:
        """Every value typed and inside its range (dlt calls this once it has resolved them)."""
        for spec in SETTINGS.values():
            value = getattr(self, spec.name)
            if value is not None and spec.checked:
                setattr(self, spec.name, _coerce(spec, value))
        if self.initial_concurrency > self.max_concurrency:
            raise SettingError(
                f"{ENV_PREFIX}INITIAL_CONCURRENCY ({self.initial_concurrency}) must not exceed "
                f"{ENV_PREFIX}MAX_CONCURRENCY ({self.max_concurrency})"
            )


@dataclass(frozen=True)
class Setting:
    """One field of `EsperSourceConfiguration` as the check, doctor and the docs read it."""

    name: str
    kind: type
    default: Any
    accepts: Accepts
    secret: bool
    required: bool

    @property
    def env(self) -> str:
        return f"{ENV_PREFIX}{self.name.upper()}"

    @property
    def key(self) -> str:
        return f"{SECTIONS[0]}.{SECTIONS[1]}.{self.name}"

    @property
    def checked(self) -> bool:
        """Its value is typed and range-checked here (a number, a flag, a list, the queries)."""
        return self.kind in (bool, int, float, tuple, dict)

    def accepted(self) -> str:
        low, high = self.accepts.low, self.accepts.high
        if self.kind is bool:
            return "true or false"
        if self.kind is tuple:
            return f"comma-separated seconds, each from {_n(low)} to {_n(high)}"
        if self.kind is dict:
            return (
                "a JSON object of name -> SQL text, or name -> {sql, cursor, key, lag_days, start} "
                "for an incremental query"
            )
        if self.kind is str:
            return "text"
        what = "a whole number" if self.kind is int else "a number"
        if high is None:
            return f"{what} >= {_n(low)}"
        return f"{what} from {_n(low)} to {_n(high)}"


def _n(number: float | None) -> str:
    """A bound as a person writes it: 10000000, 0.1."""
    return str(int(number)) if float(number or 0).is_integer() else format(number, "g")


def _declared() -> dict[str, Setting]:
    hints = EsperSourceConfiguration.get_resolvable_fields()
    found = {}
    for spec_field in fields(EsperSourceConfiguration):
        if spec_field.name not in hints:
            continue
        hint, accepts = hints[spec_field.name], spec_field.metadata[_ACCEPTS]
        inner = extract_inner_type(hint)
        kind = accepts.kind or getattr(inner, "__origin__", inner)
        found[spec_field.name] = Setting(
            spec_field.name,
            kind if isinstance(kind, type) else object,
            getattr(EsperSourceConfiguration, spec_field.name),
            accepts,
            secret=is_secret_hint(hint),
            required=not is_optional_type(hint) and spec_field.default is None,
        )
    return found


SETTINGS: dict[str, Setting] = _declared()


def changed(config: EsperSourceConfiguration) -> dict[str, object]:
    """The checked settings not at their default (what `doctor` shows): never the key, the base
    URL or the enterprise id; of the Data Tap queries, their names."""
    found: dict[str, object] = {}
    for spec in SETTINGS.values():
        value = getattr(config, spec.name)
        if spec.checked and not spec.secret and value is not None and value != spec.default:
            found[spec.name] = sorted(value) if spec.kind is dict else value
    return found


class SettingError(ValueError):
    """A setting's value is outside what it accepts (the message names it and the range)."""


def resolve_settings(
    explicit: Mapping[str, Any] | None = None,
    *,
    pipeline_name: str | None = None,
    accept_partial: bool = False,
) -> EsperSourceConfiguration:
    """The source's settings as dlt resolves them for `esper()`: `explicit` values first, then
    each provider (environment, secrets.toml, config.toml), under `pipeline_name` and then
    without it, from `sources.esper.esper.<name>` down to a bare `<name>`; typed and checked.

    Raises:
        SettingError: a value outside what its setting accepts, naming it, its environment
            variable and the accepted range.
        ConfigFieldMissingException: (unless `accept_partial`) a required setting set nowhere.
    """
    unknown = sorted(set(explicit or {}) - set(SETTINGS))
    if unknown:
        raise SettingError(f"not a setting of the esper source: {', '.join(unknown)}")
    context = ConfigSectionContext(pipeline_name=pipeline_name, sections=SECTIONS)
    try:
        with inject_section(context, merge_existing=False):
            return resolve_configuration(
                EsperSourceConfiguration(),
                explicit_value=dict(explicit or {}),
                accept_partial=accept_partial,
            )
    except ConfigValueCannotBeCoercedException as error:  # dlt could not type it
        spec = SETTINGS.get(error.field_name)
        if spec is None:
            raise
        raise _refused(spec, error.field_value) from None


def _refused(spec: Setting, value: object) -> SettingError:
    shown = "<secret>" if spec.secret else repr(value)
    return SettingError(f"{spec.env} ({spec.key}) = {shown}: expected {spec.accepted()}")


def _is_query(query: object) -> bool:
    """A Data Tap query: SQL text, or `{sql, cursor, key, lag_days, start}` (only `sql` required)."""
    if isinstance(query, str):
        return bool(query.strip())
    if not isinstance(query, Mapping) or not set(query) <= {
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


def _coerce(spec: Setting, value: object) -> object:
    """`value` (an explicit value, or what dlt typed from the environment or TOML) as the
    setting's type, inside its range."""
    bad = _refused(spec, value)
    low, high = spec.accepts.low, spec.accepts.high
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
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and _is_query(v) for k, v in value.items()
        ):
            raise bad
        return {k: v if isinstance(v, str) else dict(v) for k, v in value.items()}
    if spec.kind is tuple:
        # "10,20,30" from the environment, a TOML list, or one number (`5`, as TOML or dlt
        # reads a lone value): one wait, repeated
        single = isinstance(value, int | float) and not isinstance(value, bool)
        parts = value.split(",") if isinstance(value, str) else [value] if single else value
        try:
            waits = tuple(float(part) for part in parts)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise bad from None
        if not waits or any(math.isnan(w) or not low <= w <= high for w in waits):  # type: ignore[operator]
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
    if math.isnan(number) or number < low or (high is not None and number > high):
        raise bad
    return number
