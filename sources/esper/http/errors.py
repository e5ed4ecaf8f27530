"""The errors of the Esper client. None of their messages ever contains the API key.

Each says what is probably wrong in words an admin can act on; the runner maps them to exit
codes (`pipelines/exit_codes.py`): `EsperConfigError` and `EsperAuthError` are settings (2),
`EsperAPIError` and `EsperResponseError` the API (3), `EsperUnavailableError` a skipped table
(6), `EsperInterrupted` an interrupted run (130).
"""

from __future__ import annotations

import base64
import re
import threading
from urllib.parse import quote, quote_plus

# How soon a stopped client's requests end (`EsperInterrupted`): every wait of the client (a
# socket read, a free slot, a wait between attempts) wakes this often to look at the stop flag.
STOP_POLL_S = 0.25


REDACTED = "[redacted]"
_secrets_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def keep_secret(key: str) -> None:
    """Take `key` out of every text `redact` is given from now on, for the life of the process.

    Called with every API key a client is built with (`origin.check_key`): the texts that leave
    (log lines, error messages, the run record, a value quoted in a warning) are made after the
    client and may outlive it.
    """
    global _pattern
    if not key:
        return
    # The forms a key takes in a text a server or a library writes: as sent, percent-encoded
    # in a URL, and in any case (a host name is lower-cased; so is a header echoed by some
    # servers): matched case-insensitively.
    forms = {key, quote(key, safe=""), quote_plus(key), *_base64_forms(key)}
    with _secrets_lock:
        _secrets.update(forms)
        alternatives = sorted(_secrets, key=len, reverse=True)  # the longest form first
        _pattern = re.compile("|".join(map(re.escape, alternatives)), re.IGNORECASE)


def _base64_forms(key: str) -> set[str]:
    """The characters of `key` in base64 (standard and URL-safe) that do not depend on its
    neighbours, at each of the three places it can start in a group of three bytes: a server
    that wraps the key in an opaque token (a page cursor, a Basic header) echoes it so. Too
    short a key has no such run long enough to name it alone."""
    forms = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + key.encode()).decode().rstrip("=")
        start = (offset * 8 + 5) // 6  # the first character of the key's own bits
        end = len(encoded) - (1 if (offset + len(key.encode())) % 3 else 0)
        run = encoded[start:end]
        if len(run) >= 16:
            forms |= {run, run.translate(_URL_SAFE)}
    return forms


_URL_SAFE = str.maketrans("+/", "-_")


def redact(text: str) -> str:
    """`text` with every API key of this process replaced by ``[redacted]``.

    The one redaction: every text that leaves the program goes through it (errors of this
    package as they are made, log lines as they are written, the run's error as it is
    recorded, a value quoted in a warning). A text is redacted whole before it is cut for
    people (`policy.clip`), so no cut keeps a piece of a key.
    """
    pattern = _pattern
    return pattern.sub(REDACTED, text) if pattern is not None and text else text


def secret_pattern() -> str | None:
    """`redact`'s pattern (case-insensitive alternatives), for Arrow's regex kernels; None while
    no key is known."""
    pattern = _pattern
    return pattern.pattern if pattern is not None else None


class EsperError(Exception):
    """Base of every error the client raises. Its message never contains the API key: it is
    redacted (`redact`) as the error is made, whatever text the caller built it from.

    Attributes:
        status: The HTTP status of the last answer, or None (no answer, or not an HTTP problem).
        route: The route template, e.g. ``"GET /v2/devices/{id}/device-apps/"``, or None.
    """

    def __init__(self, message: str, *, status: int | None = None, route: str | None = None):
        super().__init__(redact(message))
        self.status = status
        self.route = route


class EsperAuthError(EsperError):
    """The API key was refused (401/403). Never retried."""


class EsperNotFoundError(EsperError):
    """The API answered 404.

    Attributes:
        tenant_level: True when the path names no record below the tenant (a list route or
            ``/enterprise/{eid}/...`` itself), so the enterprise id or base URL is the likely cause.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 404,
        route: str | None = None,
        tenant_level: bool = False,
    ):
        super().__init__(message, status=status, route=route)
        self.tenant_level = tenant_level


class EsperAPIError(EsperError):
    """Retries exhausted (429, 5xx, timeout, dropped connection), or another 4xx answer."""


class EsperResponseError(EsperError):
    """A body that is not the JSON expected (malformed page), after bounded retries."""


class EsperConfigError(EsperError):
    """Bad settings: base URL, key, limits, or a link that leaves the configured origin."""


class EsperUnavailableError(EsperError):
    """A table cannot be read in this run, though the run's first requests proved the settings.

    A missing capability, not a wrong setting: the key lacks a scope, the tenant's plan lacks
    the feature, the route does not serve this platform, or a quota (Data Tap) is spent. The run
    skips that table, names it with `reason`, loads the rest and ends partial.

    Attributes:
        table: The raw table that is skipped (e.g. ``"status_metrics"``, ``"data_tap_daily"``).
        reason: A short likely meaning for people, e.g. ``"missing scope or plan feature"``.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str,
        reason: str,
        status: int | None = None,
        route: str | None = None,
    ):
        super().__init__(message, status=status, route=route)
        self.table = table
        self.reason = reason


UNAVAILABLE_MEANING = {
    403: "refused for this route: the key lacks a scope or the plan lacks the feature",
    404: "route not served for this tenant: plan, platform or API version",
}


class EsperInterrupted(KeyboardInterrupt):
    """The client was stopped (`EsperClient.stop()`, `close()`, or Ctrl-C during `map`).

    A `KeyboardInterrupt`, not an `EsperError`: an interruption is not an API failure, is never
    retried, and passes through every ``except Exception`` on its way to the run, which reports
    it as interrupted. Requests in flight when the client stops end with it within about
    `STOP_POLL_S` seconds; no request is sent after it.
    """
