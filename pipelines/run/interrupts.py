"""Ctrl-C and SIGTERM: the run's client stops first, and the summary says what was kept."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

# What an interruption leaves, by the step it stopped (the run's summary says it).
AFTER_INTERRUPT = {
    "start": "nothing was loaded; the next run starts afresh",
    "extract": "nothing of this run was loaded and no cursor moved; the next run reads it again",
    "normalize": "nothing of this run was loaded; the extracted data is kept pending and the "
    "next run loads it first",
    "load": "the load stopped part-way; the next run finishes it first (no row is doubled)",
    "after the load": "everything extracted was loaded; the next run checks it again",
    "between parts": "no part was in progress",
}
# Said instead of "this run" once parts of it are committed (sources/esper/scan/walk.py).
IN_PROGRESS = "the part in progress"
KEPT = ": the next run goes on from them"  # said of committed parts (sources/esper/scan/walk.py)


def interrupted_text(stage: str, committed_parts: int, progress: str) -> str:
    """What an interrupted run says: the step it stopped in, what is kept, what the next run does.

    Args:
        stage: the step it stopped in (a key of `AFTER_INTERRUPT`).
        committed_parts: the parts of a full scan this run committed before it stopped.
        progress: what the extract had read (said when it stopped during the extract).
    """
    extracted = f" ({progress})" if stage == "extract" else ""
    after = AFTER_INTERRUPT[stage]
    if committed_parts:
        after = after.replace("this run", IN_PROGRESS).replace(
            "nothing was loaded; the next run starts afresh", "nothing more was loaded"
        )
    text = f"interrupted during {stage}{extracted}: {after}"
    if committed_parts:
        text += f" ({committed_parts} part(s) of this full scan are committed{KEPT})"
    return text


def stop_client(client: Any) -> None:
    """Stop the client's requests at once (`EsperClient.stop`; a no-op for other clients)."""
    stop = getattr(client, "stop", None)
    if callable(stop):
        stop()


def stop_client_on_signals(client: Callable[[], Any]) -> Callable[[], None]:
    """On Ctrl-C or SIGTERM, stop the run's client first, then interrupt the main thread.

    Without it, requests in flight in worker threads were retried against a client being
    closed (~64 warnings about a bad file descriptor) before the run stopped. dlt installs its
    own handlers around normalize and load and restores these afterwards. Only the main thread
    can install handlers; elsewhere (a Dagster worker thread) this does nothing.

    Returns:
        A function that puts the previous handlers back.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: Any) -> None:
        stop_client(client())
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
