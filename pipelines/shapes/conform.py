"""The simulator tests' comparison: a simulator answer's shape against the live one, strictly.

Unlike doctor (`compare.py`), which grades a real tenant's answer and names only what would break
a run, this is all or nothing and keeps the simulator honest
(`tests/simulator/test_live_conformance.py`, `test_conformance.py`). Both read a live object's
keys as required (in a list, the keys every variant has) and a collapsed ``"dict"``/``"list"``
or an empty ``{}``/``[]`` as "any such container"; the rules differ, on purpose, in this, and each
caller keeps its own:

* a missing key is a problem here; for doctor a note unless it is a table's key or cursor;
* type names must be equal here (an ``int`` where ``float`` was recorded fails); doctor takes an
  integer where a number was recorded;
* a list's live variants take the types of the first variant here; doctor unites them;
* a null either side is compatible here; for doctor a null where a value was seen is a note;
* objects whose keys vary record by record (`FREE_FORM`) are compared as objects only, here
  and by doctor;
* extra keys are handed back to the caller here, who lists the justified ones; doctor notes them.
"""

from __future__ import annotations

from typing import Any

# Objects whose keys vary record by record (live route 27: "command_args keys vary"): compared as
# objects, not key by key.
FREE_FORM = (".command_args",)


def shape_problems(live: Any, sim: Any, where: str, extras: list[str]) -> list[str]:
    """Where `sim` (a shape) fails `live` (a shape); extra sim keys are appended to `extras`.

    Null either side is compatible (a sample of three rows is no proof of "always null"); a live
    list's item variants are merged (keys present in every variant are required).
    """
    if where.endswith(FREE_FORM):
        return [] if isinstance(sim, dict) or sim == "NoneType" else [f"{where}: not an object"]
    if live == "NoneType" or sim == "NoneType":
        return []  # null either side: compatible (the sample is small)
    if live in ("dict", "list"):  # a container collapsed by the recorder (five levels deep)
        ok = isinstance(sim, dict) if live == "dict" else isinstance(sim, list)
        return [] if ok else [f"{where}: {sim!r}, expected {live}"]
    if isinstance(live, str):
        return [] if sim == live else [f"{where}: {sim!r}, expected {live}"]
    if isinstance(live, dict):
        if not isinstance(sim, dict):
            return [f"{where}: {type(sim).__name__ if not isinstance(sim, str) else sim}, "
                    "expected an object"]  # fmt: skip
        if not live:
            return []  # an empty object was recorded: nothing to compare
        problems = [f"{where}.{k}: missing" for k in live if k not in sim]
        extras.extend(f"{where}.{k}" for k in sim if k not in live)
        for k in live:
            if k in sim:
                problems += shape_problems(live[k], sim[k], f"{where}.{k}", extras)
        return problems
    if isinstance(live, list):
        if not isinstance(sim, list):
            return [f"{where}: {sim!r}, expected a list"]
        if not live or not sim:
            return []
        problems = []
        merged = _required_union(live)
        for item in sim:
            problems += shape_problems(merged, item, f"{where}[]", extras)
        return sorted(set(problems))
    raise AssertionError(f"unexpected shape node at {where}: {live!r}")


def _required_union(variants: list[Any]) -> Any:
    """The live list item variants as one shape: keys in every variant, types from the first."""
    if not all(isinstance(v, dict) for v in variants):
        return variants[0]
    keys = set.intersection(*(set(v) for v in variants))
    return {k: variants[0][k] for k in variants[0] if k in keys}
