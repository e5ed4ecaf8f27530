"""What doctor saw: one report per route, the whole result, and the human report (no values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...exit_codes import Exit
from ...shapes import BREAK, NOTE, SET_ASIDE, Finding, Seen

_MAX_NOTES_PER_ROUTE = 25
REFUSED = "refused: a run would skip this table (partial run)"
REFUSED_MEANING = {
    400: "the route does not serve this record (a legacy route asked about a device that is "
    "not Android)",  # only on a route read per record: elsewhere a 400 is a failure
    403: "the key lacks the scope for it, or the tenant's plan or platform does not offer it",
    404: "the tenant's plan or platform does not offer it",
}


@dataclass
class RouteReport:
    """What one probe saw (no values)."""

    name: str
    method: str
    route: str
    used_by_source: bool
    basis: str  # one of shapes.reference.BASES
    status: int | None = None
    envelope: str | None = None
    expected_envelope: list[str] = field(default_factory=list)
    envelope_keys: dict[str, str] = field(default_factory=dict)
    items: int | None = None
    count: int | None = None
    seconds: float = 0.0
    attempts: int = 0
    throttled: int = 0
    shape: Any = None
    findings: list[Finding] = field(default_factory=list)
    skips: list[str] = field(default_factory=list)  # refused: the tables a run would skip
    outcome: str | None = None  # an answer that stopped the probe (`key refused (HTTP 401)`)

    def saw(self, seen: Seen) -> None:
        """Take what the answer showed (`shapes.check_answer`)."""
        self.shape, self.envelope = seen.shape, seen.envelope
        self.envelope_keys, self.items, self.count = seen.envelope_keys, seen.items, seen.count


@dataclass
class Result:
    """The whole probe: its exit code, routes and findings (for the report and the tests)."""

    exit_code: int
    routes: list[RouteReport]
    requests: int
    retries: int
    throttled: int
    seconds: float
    stopped: str | None = None
    skipped: list[str] = field(default_factory=list)
    # the source's settings not at their default (`settings.changed`): what a run would use
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.routes for f in r.findings]

    @property
    def refused(self) -> list[dict[str, Any]]:
        """The routes the key cannot read (403/404 after the first two requests): a run would
        skip their tables (a partial run), it would not break."""
        return [
            {
                "route": f"{r.method} {r.route}",
                "status": r.status,
                "meaning": REFUSED_MEANING.get(r.status or 0, ""),
                "used_by_source": r.used_by_source,
                "tables": r.skips,
            }
            for r in self.routes
            if any(f.where == "route" and f.problem.startswith(REFUSED) for f in r.findings)
        ]

    @property
    def would_skip(self) -> list[str]:
        """The tables a run would skip, whole or in part, for the refused routes."""
        return sorted({t for r in self.refused for t in r["tables"]})

    def as_json(self) -> dict[str, Any]:
        verdict = {
            Exit.OK: "ok",
            Exit.CONFIG: "config",
            Exit.DRIFT: "drift",
            Exit.PARTIAL: "partial",
        }[self.exit_code]
        return {
            "tool": "esper-warehouse doctor",
            "verdict": verdict,
            "exit_code": self.exit_code,
            "stopped": self.stopped,
            "requests": self.requests,
            "retries": self.retries,
            "throttled": self.throttled,
            "seconds": round(self.seconds, 3),
            "skipped": self.skipped,
            "settings": {
                k: list(v) if isinstance(v, tuple) else v for k, v in self.settings.items()
            },
            "refused": self.refused,
            "would_skip": self.would_skip,
            "routes": [
                {
                    **{k: v for k, v in vars(r).items() if k != "findings"},
                    "findings": [vars(f) for f in r.findings],
                }
                for r in self.routes
            ],
        }


def render(result: Result) -> str:
    """The human report."""
    lines = [
        f"esper-warehouse doctor: {result.requests} requests, {result.retries} retries, "
        f"{result.throttled} throttled (429), {result.seconds:.1f} s",
        "",
        f"{'route':<54} {'status':>6}  {'envelope':<14} {'items':>5} {'count':>7} "
        f"{'seconds':>7}  {'basis':<5}  {'result':<10}  probe",
    ]
    for r in result.routes:
        worst = (
            r.outcome
            if r.outcome
            else "BREAKS"
            if any(f.severity == BREAK for f in r.findings)
            else f"{len(r.findings)} notes"
            if r.findings
            else "ok"
        )
        used = "" if r.used_by_source else " (not read)"
        lines.append(
            f"{(r.method + ' ' + r.route + used)[:54]:<54} {r.status or '-':>6}  "
            f"{r.envelope or '-':<14} {_n(r.items):>5} {_n(r.count):>7} {r.seconds:>7.3f}  "
            f"{r.basis:<5}  {worst:<10}  {r.name}"
        )
    breaks = [f for f in result.findings if f.severity == BREAK]
    notes = [f for f in result.findings if f.severity == NOTE and not f.problem.startswith(REFUSED)]
    if result.refused:
        lines += ["", "The key cannot read (a run would skip these tables: a partial run):"]
        lines += [
            f"  {r['route']}: HTTP {r['status']}, {r['meaning']}"
            + (f"; a run skips {', '.join(r['tables'])}" if r["tables"] else "")
            for r in result.refused
        ]
    set_aside = [f for f in result.findings if f.severity == SET_ASIDE]
    if set_aside:
        lines += [
            "",
            "A run would set these records aside (_esper_rejected) and keep their table as "
            "loaded, or load it without them (a partial run):",
        ] + [f"  {f.text()}" for f in set_aside]
    if breaks:
        lines += ["", "Would break a run:"] + [f"  {f.text()}" for f in breaks]
    if notes:
        lines += ["", f"Notes ({len(notes)}; a run copes with these):"]
        lines += [f"  {f.text()}" for f in notes[: _MAX_NOTES_PER_ROUTE * 2]]
        if len(notes) > _MAX_NOTES_PER_ROUTE * 2:
            lines.append(f"  ... {len(notes) - _MAX_NOTES_PER_ROUTE * 2} more in the JSON report")
    lines += ["", _settings_line(result.settings)]
    if result.skipped:
        lines += ["", "Not probed:"]
        lines += [f"  {s}" for s in result.skipped]
    lines.append("")
    if result.stopped:
        lines.append(f"Stopped: {result.stopped} (exit {Exit.CONFIG})")
    elif breaks:
        plural = "s" if len(breaks) != 1 else ""
        lines.append(
            f"Verdict: {len(breaks)} problem{plural} would break a run (exit {Exit.DRIFT})."
        )
    elif result.would_skip or set_aside:
        skipped = ", ".join(result.would_skip)
        lines.append(
            "Verdict: nothing found that would break a run; a run would be partial "
            f"(exit {Exit.PARTIAL})"
            + (f", skipping {skipped}" if skipped else "")
            + (f", setting records aside on {len(set_aside)} route(s)" if set_aside else "")
            + "."
        )
    else:
        lines.append("Verdict: nothing found that would break a run (exit 0).")
    return "\n".join(lines)


def _settings_line(settings: dict[str, Any]) -> str:
    """The source's settings a run would use that are not at their default."""
    if not settings:
        return "Settings: every source setting at its default (docs/reference/settings.md)."
    shown = ", ".join(f"{name} = {value}" for name, value in settings.items())
    return f"Settings not at their default (docs/reference/settings.md): {shown}."


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)
