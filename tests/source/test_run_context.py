"""The run context (`RunLedger`) is typed parts with named hand-offs, not a bag of fields.

What a contributor checks before adding a resource: which part of the context the resource
writes, who reads it, and that nothing else reaches into it.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import typing
from pathlib import Path

import pytest
from esper_warehouse.sources.esper.run import ledger as ledger_module
from esper_warehouse.sources.esper.run.ledger import RunLedger, RunPlan

ROOT = Path(__file__).resolve().parents[2]
OWN = "esper_warehouse.sources.esper"


def _parts() -> dict[str, type]:
    """Field name -> the class of that part of the ledger."""
    hints = typing.get_type_hints(RunLedger, vars(ledger_module))
    return {f.name: hints[f.name] for f in dataclasses.fields(RunLedger)}


def test_each_part_of_the_run_context_is_a_class_saying_who_writes_and_reads_it() -> None:
    """A part is one of our classes (no dict, set, flag or `Any` shared as is), whose docstring
    names its writers and its readers; none of a part's own fields is typed `Any`."""
    parts = _parts()
    assert {"plan", "devices", "commands", "feeds", "refusals", "scans"} <= set(parts)
    for name, part in parts.items():
        assert isinstance(part, type) and part.__module__.startswith(OWN), (name, part)
        doc = part.__doc__ or ""
        assert "Written by" in doc and "Read by" in doc, f"{part.__name__}: who writes, reads?"
        annotations = getattr(part, "__annotations__", {})
        loose = [f for f, a in annotations.items() if re.search(r"\bAny\b", str(a))]
        assert not loose, f"{part.__name__} has fields typed Any: {loose}"


def test_the_plan_cannot_be_changed_by_a_resource() -> None:
    """The plan is decided as the run opens; a resource reads it and cannot write it."""
    plan = RunLedger().plan
    assert isinstance(plan, RunPlan) and plan.as_of is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.full_scan = True  # type: ignore[misc]


def test_no_code_outside_the_ledger_reaches_into_a_part() -> None:
    """Hand-offs go through named methods: no module but the ledger's own touches a private
    name (a lock, a dict) of the ledger or of one of its parts."""
    own = {ROOT / "sources/esper/run/ledger.py", ROOT / "sources/esper/run/refusals.py"}
    reaching = re.compile(r"\bledger(\.\w+)*\._\w+")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("sources", "pipelines")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path not in own
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if reaching.search(line)
    ]
    assert not found


def test_a_shared_read_does_not_wait_for_a_read_of_another_name() -> None:
    """Each list read once per run is read under its own name's lock: a read that needs
    another shared read (and a fan-out asking for the event marks while a slow list is read)
    does not wait for it."""
    ledger = RunLedger()
    done: list[str] = []

    def outer() -> str:
        return "users of " + ledger.shared.read_once("roles", lambda: "roles")

    thread = threading.Thread(target=lambda: done.append(ledger.shared.read_once("users", outer)))
    thread.daemon = True  # a lock held for ever must not hang the test session
    thread.start()
    thread.join(timeout=5)
    assert done == ["users of roles"]
    assert ledger.shared.read_once("users", lambda: "read twice") == "users of roles"


def test_a_shared_read_that_failed_fails_again_for_each_table_asking() -> None:
    """The first table asking reads; an error is raised again to every table built from it."""
    ledger = RunLedger()
    calls: list[int] = []

    def refused() -> str:
        calls.append(1)
        raise RuntimeError("403")

    for _ in range(2):
        with pytest.raises(RuntimeError, match="403"):
            ledger.shared.read_once("users", refused)
    assert len(calls) == 1
