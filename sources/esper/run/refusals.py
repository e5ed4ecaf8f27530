"""What the API refused in one run: tables skipped, parts of tables skipped, parts to ask again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..http.errors import EsperError, EsperUnavailableError

log = logging.getLogger(__name__)

RetryNote = bool | str  # what asking a part again needs: True, or the route to ask (apps)


@dataclass
class Refusals:
    """The tables and parts this run skipped, each named and counted; the parts to ask again.

    Written by the resources through `common.py` (`skip_unavailable`: `mark_unavailable` and
    `skip_dependents`; `refused_part`: `skip_part`, `part_done`; `keep_if_refused`:
    `mark_skipped`), by `scan/devices.py` (`leave_out`: the legacy list refused) and Data Tap
    (`mark_unavailable`). `run/state.py` (`bind_retries`) gives it the run's writable dict of
    parts to ask again, `scan/opening.py` the tables read from each table (`dependents`). Read by
    the resources (`is_skipped`, `to_retry`), and by the pipeline after the load
    (`skipped` for the run record, `is_skipped` for reconciliation). Under a lock: the fan-outs
    refuse from dlt's worker threads.
    """

    # table -> the tables read from it (`tables.DEPENDENTS`, set by `open_run`): skipped with it
    dependents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    _unavailable: dict[str, str] = field(default_factory=dict)  # table -> why it was skipped
    # (table, route, status, meaning, noun) -> parts of the table the API refused (per device,
    # per blueprint, per role, ...): each counted, none silent
    _part_skips: dict[tuple[str, str | None, int | None, str, str], int] = field(
        default_factory=dict
    )
    # table -> what a refused route left out of it although the table loaded ("devices":
    # the Android patch levels of the legacy device list)
    _left_out: dict[str, str] = field(default_factory=dict)
    # the parts to ask again on the next run, {table: {parent id: note}}: the run's writable
    # `state.REFUSED_PARTS` dict (`bind_retries`), None until bound
    _retries: dict[str, dict[str, RetryNote]] | None = None
    # table -> (route, status, table it is read from) of the refusal that skipped it or first
    # refused one of its parts: what `treatments` names for the freshness of each table
    _causes: dict[str, tuple[str | None, int | None, str | None]] = field(default_factory=dict)
    _kept: set[str] = field(default_factory=set)  # tables kept whole as loaded (`keep_if_refused`)
    # (table, column, route) -> records served without `column` and set aside (`set_aside`)
    _set_aside: dict[tuple[str, str, str | None], int] = field(default_factory=dict)
    _kept_whole: dict[str, str] = field(default_factory=dict)  # table -> why (`keep`)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def keep_retries_in(self, retries: dict[str, dict[str, RetryNote]]) -> None:
        """Note the parts to ask again in `retries` (the dict dlt commits with the run)."""
        with self._lock:
            self._retries = retries

    def skip_part(
        self,
        table: str,
        part: str,
        error: EsperError,
        meaning: str,
        *,
        noun: str = "device",
        retry: RetryNote | None = True,
    ) -> None:
        """Count one part of `table` whose route the API refused (logged once per route).

        Args:
            part: the parent's id (a device, a blueprint, a role).
            error: the refusal (its `route` and `status` are named).
            retry: what the next run needs to ask the part again (kept until it answers), or
                None when the table itself asks again (a replaced table, a head not moved).
        """
        key = (table, error.route, error.status, meaning, noun)
        with self._lock:
            first = key not in self._part_skips
            self._part_skips[key] = self._part_skips.get(key, 0) + 1
            self._causes.setdefault(table, (error.route, error.status, None))
            if retry is not None and self._retries is not None:
                self._retries.setdefault(table, {})[part] = retry
        if first:
            log.warning(
                "%s: skipping %ss whose %s answers %d (%s); counted in the run summary",
                table,
                noun,
                error.route,
                error.status,
                meaning,
            )

    def part_done(self, table: str, part: str) -> None:
        """One part of `table` answered (or its parent is gone): not asked again for a refusal."""
        with self._lock:
            if self._retries is not None and part in self._retries.get(table, {}):
                del self._retries[table][part]
                if not self._retries[table]:
                    del self._retries[table]

    def owe(self, table: str, parts: Iterable[str]) -> None:
        """Parts of `table` this run did not read although it read their parents (a selection
        that left the table out): the next run asks them as it asks refused ones."""
        with self._lock:
            if self._retries is not None and (parts := list(parts)):
                self._retries.setdefault(table, {}).update(dict.fromkeys(parts, True))

    def to_retry(self, table: str) -> dict[str, RetryNote]:
        """The parts of `table` an earlier run was refused and this run asks again."""
        with self._lock:
            return dict((self._retries or {}).get(table, {}))

    def leave_out(self, table: str, text: str) -> None:
        """Record (and log once) what a refused route left out of a table that still loads."""
        self._note_once(self._left_out, table, text, "%s: loaded without %s")

    def skipped(self) -> dict[str, str]:
        """Why each table was skipped, whole or in part, e.g. for `_esper_runs`."""
        with self._lock:
            out = dict(self._unavailable)
            for table, text in self._kept_whole.items():
                out[table] = f"{out[table]}; {text}" if table in out else text
            for table, text in self._left_out.items():
                text = f"loaded without {text}"
                out[table] = f"{out[table]}; {text}" if table in out else text
            for (table, route, status, meaning, noun), count in sorted(self._part_skips.items()):
                text = f"{count} {noun}(s) skipped: {route} answered {status} ({meaning})"
                out[table] = f"{out[table]}; {text}" if table in out else text
            for (table, column, route), count in sorted(self._set_aside.items(), key=str):
                text = (
                    f"{count} record(s) set aside: {table}.{column} missing or null in GET "
                    f"{route} (kept in _esper_rejected)"
                )
                out[table] = f"{out[table]}; {text}" if table in out else text
        return out

    def is_skipped(self, table: str) -> bool:
        """Whether `table` is skipped whole in this run (its route, or a table it is read from)."""
        with self._lock:
            return table in self._unavailable

    def why(self, table: str) -> str | None:
        """Why `table` is skipped whole in this run; None when it is not."""
        with self._lock:
            return self._unavailable.get(table)

    def mark_skipped(self, table: str, text: str, *, kept: bool = False) -> None:
        """Record (and log once) that `table` is skipped in this run, for the reason `text`
        (`kept`: a replaced table kept whole as loaded, since some of its parts were refused)."""
        if kept:
            with self._lock:
                self._kept.add(table)
        self._note_once(
            self._unavailable, table, text, "%s: not loaded in this run (unavailable), %s"
        )

    def set_aside(
        self, table: str, column: str, route: str | None, count: int, *, kept: bool
    ) -> None:
        """`count` records of `table` served without `column` from `route` were set aside so
        far (`RunLedger.set_aside`); `kept`: the table is kept whole as loaded (a whole list is
        never replaced by one that lacks a record), else it loads the rest (partial). Neither
        skips the table: the tables read from it load from its other records."""
        with self._lock:
            first = (table, column, route) not in self._set_aside
            self._set_aside[(table, column, route)] = count
            self._causes.setdefault(table, (route, None, None))
        if first:
            log.warning(
                "%s.%s: missing or null in a record from GET %s: set aside (_esper_rejected)",
                table,
                column,
                route,
            )
        if kept:
            self.keep(table, "kept as loaded, as a record of its list was set aside")

    def keep(self, table: str, text: str) -> None:
        """`table`, a whole list, is kept as loaded in this run, for the reason `text`, and still
        read from (unlike a skipped table)."""
        self._note_once(self._kept_whole, table, text, "%s: %s")

    def is_kept(self, table: str) -> bool:
        """Whether `table` is kept whole as loaded in this run (`keep`)."""
        with self._lock:
            return table in self._kept_whole

    def mark_unavailable(self, table: str, error: EsperUnavailableError) -> None:
        """Record (and log once) that `table` is skipped in this run, with the route and status."""
        if error.route and error.status:
            text = f"skipped: {error.route} answered {error.status} ({error.reason})"
        else:  # not an answer of a route (a Data Tap job that failed, a spent request budget)
            text = f"skipped: {error.reason}"
        with self._lock:
            self._causes.setdefault(table, (error.route, error.status, None))
        self.mark_skipped(table, text)

    def skip_dependents(self, table: str) -> None:
        """Skip, naming the same refusal, the tables read from `table` (`dependents`)."""
        why = self.why(table)
        with self._lock:
            route, status, _ = self._causes.get(table, (None, None, None))
        for dependent in self.dependents.get(table, ()):
            with self._lock:
                self._causes.setdefault(dependent, (route, status, table))
            self.mark_skipped(dependent, f"{why} (read from {table})")

    def treatments(self, read: Iterable[str], rows: Mapping[str, int]) -> dict[str, dict[str, Any]]:
        """How this run treated each table it read, for `_esper_runs.tables` and the freshness
        model (sql/intermediate/int_table_freshness.sql): ``{table: {"treatment", "route",
        "status", "read_from", "why"}}``.

        treatment: `loaded` (read whole), `partial` (loaded, some parts refused or left out, or
        some records set aside: those keep older rows), `kept` (a replaced table kept whole as an earlier run
        loaded it) or `skipped` (not loaded: its route, or the table it is read from, refused).

        Args:
            read: the tables this run's resources read (skipped ones included).
        """
        skipped = self.skipped()
        with self._lock:
            parts = {table for table, *_ in self._part_skips} | set(self._left_out)
            parts |= {table for table, *_ in self._set_aside}
            out: dict[str, dict[str, Any]] = {}
            for table in sorted({*read, *skipped}):
                if table in self._unavailable:
                    treatment = "kept" if table in self._kept else "skipped"
                elif table in self._kept_whole:
                    treatment = "kept"
                elif table in parts:
                    treatment = "partial" if rows.get(table) else "kept"
                else:
                    treatment = "loaded"
                route, status, read_from = self._causes.get(table, (None, None, None))
                out[table] = {
                    "treatment": treatment,
                    "route": route,
                    "status": status,
                    "read_from": read_from,
                    "why": skipped.get(table),
                }
        return out

    def _note_once(self, notes: dict[str, str], table: str, text: str, line: str) -> None:
        """`notes[table] = text` and one warning `line % (table, text)`, the first time only."""
        with self._lock:
            if table in notes:
                return
            notes[table] = text
        log.warning(line, table, text)
