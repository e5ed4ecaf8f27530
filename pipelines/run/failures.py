"""What a failed run means: its exit code, the text a user reads, whether it was interrupted."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dlt
from esper_warehouse.sources.esper.http import (
    EsperAuthError,
    EsperConfigError,
    EsperError,
    EsperNotFoundError,
)
from esper_warehouse.sources.esper.times import NotATime

from ..exit_codes import Exit
from ..warehouse import WarehouseLocked, is_lock_error


def exit_code_for(error: BaseException) -> int:
    """The exit code of an error, looking through dlt's wrappers for the cause."""
    cause = root_cause(error)
    if isinstance(cause, WarehouseLocked) or is_lock_error(error):
        return Exit.LOCKED
    if isinstance(cause, EsperAuthError | EsperConfigError):
        return Exit.CONFIG
    if isinstance(cause, EsperNotFoundError) and getattr(cause, "tenant_level", False):
        return Exit.CONFIG
    if isinstance(cause, EsperError | NotATime):  # NotATime: a cursor the API served
        return Exit.API
    if type(cause).__name__ in ("ConfigFieldMissingException", "ConfigurationValueError"):
        return Exit.CONFIG
    return Exit.FAILED


def root_cause(error: BaseException) -> BaseException:
    """The innermost error that explains a failure (EsperError first, else the deepest)."""
    chain = _chain(error)
    for item in chain:
        if isinstance(item, EsperError | WarehouseLocked):
            return item
    return chain[-1]


def error_text(error: BaseException) -> str:
    """The innermost cause of a failure, as the user reads it.

    An innermost error with no message of its own (`StopIteration` from a `next()` over
    nothing, turned into a RuntimeError by the generator it escaped) also says where it was
    raised and what the nearest error around it said, never just `StopIteration:`.
    """
    cause = root_cause(error)
    if (missing := missing_setting(cause)) is not None:
        return missing
    if str(cause):
        return f"{type(cause).__name__}: {cause}"
    chain = _chain(error)
    text = f"{type(cause).__name__} (no message), raised at {_raised_at(chain)}"
    around = next((e for e in reversed(chain[:-1]) if str(e)), None)
    return f"{text}; around it: {type(around).__name__}: {around}" if around else text


def missing_setting(error: BaseException) -> str | None:
    """One line naming the environment variable of each setting dlt found nowhere, else None.

    dlt's own message lists every place it looked, 25 lines for one unset key; what an admin
    needs is the variable to set (its `secrets.toml` place is the same name in sections).
    """
    if type(error).__name__ != "ConfigFieldMissingException":
        return None
    names = []
    for field, traces in getattr(error, "traces", {}).items():
        keys = [
            t.key for t in _lookups(traces) if "Environment" in str(t.provider) and "__" in t.key
        ]
        # the source's own variable: SOURCES__ESPER__API_KEY, the shortest in its section
        ours = sorted((k for k in keys if k.startswith("SOURCES__ESPER__")), key=len)
        names.append(ours[0] if ours else field)
    listed = " and ".join(names) or "a setting"
    return (
        f"{listed} is not set: export it (or set it in .dlt/secrets.toml); nothing was requested "
        "or loaded"
    )


def _lookups(traces: Any) -> Iterator[Any]:
    """The places dlt looked (`LookupTrace`s) in a field's traces, through the traces of an
    embedded configuration (`LookupTraces`: a destination's credentials) at any depth."""
    for trace in traces:
        if hasattr(trace, "key"):
            yield trace
        else:
            for nested in getattr(trace, "traces", {}).values():
                yield from _lookups(nested)


def _chain(error: BaseException) -> list[BaseException]:
    """The error and its causes, outermost first (dlt's `exception` attribute, then Python's)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = _inner(current)
    return chain


def _inner(error: BaseException) -> BaseException | None:
    """The error that explains `error`: dlt's `exception`, its `__cause__`, else the error being
    handled when it was raised (`__context__`), except one the code hid (`raise ... from None`)
    and the end of an iteration: a `StopIteration` in the context is the loop `error` was raised
    in (dlt's pipes), never its cause, and printed alone it said "StopIteration (no message)"."""
    explained = getattr(error, "exception", None) or error.__cause__
    if explained is not None:
        return explained
    context = error.__context__
    if error.__suppress_context__ or isinstance(context, StopIteration | StopAsyncIteration):
        return None
    return context


def _raised_at(chain: Sequence[BaseException]) -> str:
    """`file:line in function` where the innermost error outside dlt's own code was raised.

    dlt's iteration leaves its own empty `StopIteration`s in the chain (as `__context__`); the
    place a user can act on is the deepest frame outside dlt of the innermost error that has one.
    """
    dlt_dir = str(Path(dlt.__file__).resolve().parent)
    for item in reversed(chain):
        frames = []
        tb = item.__traceback__
        while tb is not None:
            frames.append(tb)
            tb = tb.tb_next
        ours = [f for f in frames if not f.tb_frame.f_code.co_filename.startswith(dlt_dir)]
        if ours:
            code = ours[-1].tb_frame.f_code
            path = Path(code.co_filename)
            if path.is_relative_to(Path.cwd()):
                path = path.relative_to(Path.cwd())
            return f"{path}:{ours[-1].tb_lineno} in {code.co_name}"
    return "an unknown place"


def toml_problem(error: BaseException) -> str | None:
    """One line naming the .dlt/*.toml file dlt could not read and where, else None.

    dlt's own error is a long traceback through its configuration machinery; what an admin needs
    is the file and the line (`... at line 3 col 19`).
    """
    if type(error).__name__ != "TomlProviderReadException":
        return None
    paths = [Path(p) for p in getattr(error, "full_paths", [])]
    where = next((str(p.resolve()) for p in paths if p.exists()), getattr(error, "file_name", "?"))
    detail = str(error).strip().splitlines()[-1]
    return f"{where} is not valid TOML: {detail}"


def is_interrupt(error: BaseException) -> bool:
    """True when a failure is Ctrl-C or SIGTERM (dlt wraps them in `PipelineStepFailed`)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt):  # also dlt's SignalReceivedException
            return True
        current = getattr(current, "exception", None) or current.__cause__ or current.__context__
    return False
