"""Where requests may go: the base URL, `next` links, route templates, the key's checks.

`Origin` turns a path or a `next` link into a URL under the configured base path and origin, or
refuses it before anything is sent, so the bearer token never travels to another host. A link
to another host of the same service (`*.esper.cloud`, or loopback), or with another scheme or
port, is moved onto the configured origin, as Esper's own tool does (live-observations.md
section 12). It also names routes for counters and messages (ids become ``{id}``).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import ssl
from urllib.parse import unquote

import httpx

from .errors import EsperAPIError, EsperConfigError, EsperError, keep_secret

log = logging.getLogger("esper_warehouse.client")

DEFAULT_PORTS = {"http": 80, "https": 443}
_UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)
_LONG_HEX_RE = re.compile(r"^[0-9a-fA-F]{16,}$")
_HEADER_SAFE_RE = re.compile(r"^[\x21-\x7e]+$")  # visible ASCII: what a header value may carry
# An enterprise id is one path segment of the legacy routes (a UUID on every tenant seen).
_ENTERPRISE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
# TLS failures a retry cannot mend: the network is fine, the setting (scheme, port, host) is not.
# A handshake cut short (EOF, reset, zero return) may be the network's, and is retried.
_TRANSIENT_TLS = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)


class Origin:
    """The configured API root of one tenant, and the checks every request URL passes.

    Args:
        base_url: The API root, e.g. ``"https://acme-api.esper.cloud/api"``. Must be HTTPS unless
            its host is loopback (127.0.0.0/8, ::1, localhost).
        enterprise_id: The tenant's enterprise id (a path segment named ``{id}`` in routes).

    Raises:
        EsperConfigError: A bad base URL.
    """

    def __init__(self, base_url: str, enterprise_id: str | None = None) -> None:
        self.base_url = normalise_base_url(base_url)
        base = httpx.URL(self.base_url)
        self.origin = origin_of(base)
        self.base_path = base.path.rstrip("/")
        self.enterprise_id = None if enterprise_id is None else check_enterprise_id(enterprise_id)
        self._rewrites_logged: set[tuple[str, str]] = set()

    def resolve(self, path_or_url: str) -> httpx.URL:
        """Turn a path or an absolute link into a URL, refusing anything off the base URL.

        Raises:
            EsperConfigError: Another origin, a path outside the base path, credentials in the
                URL, or dot segments (checked before anything is sent).
        """
        # httpx collapses `a/../b` into `b`: dot segments are looked for in what was asked.
        asked = re.split(r"[?#]", path_or_url, maxsplit=1)[0].split("/")
        if any(unquote(segment) in (".", "..") for segment in asked):
            raise EsperConfigError(
                f"refusing to request {path_or_url!r}: dot segments ('.', '..') would leave "
                f"the route it names under the base path of {self.text()}"
            )
        try:
            if path_or_url.startswith("/") and not path_or_url.startswith("//"):
                url = httpx.URL(self.base_url + path_or_url)  # the usual case: a path
            else:
                url = httpx.URL(path_or_url)
                if not (url.scheme or url.host):  # "v2/devices/": a path after all
                    url = httpx.URL(f"{self.base_url}/{path_or_url}")
                elif origin_of(url) != self.origin or url.userinfo:
                    url = self._onto_configured_origin(url)
        except httpx.InvalidURL as exc:
            raise EsperConfigError(f"not a usable path or URL ({exc})") from None
        segments = url.path.split("/")
        under_base = url.path == self.base_path or url.path.startswith(self.base_path + "/")
        if not under_base or "." in segments or ".." in segments:
            raise EsperConfigError(
                f"refusing to request {url.path!r}: it is not under the base path "
                f"{self.base_path or '/'!r} of {self.text()}"
            )
        return url

    def _onto_configured_origin(self, url: httpx.URL) -> httpx.URL:
        """A link off the configured origin, moved onto it when it names the same service.

        Esper's own support tool rewrites `next` links that say `http://`, or name another
        `*.esper.cloud` host, onto the configured host (live-observations.md section 12). Here:
        the same host with another scheme or port, or a host of the same service (both
        `*.esper.cloud`, or both loopback), keeps its path and query and moves onto the configured
        origin, so the key still goes nowhere else. Anything else is refused before sending.

        Raises:
            EsperConfigError: A link to another service, or one with credentials in it.
        """
        scheme, host, port = self.origin
        link_host = url.host.lower()
        if url.userinfo or not (link_host == host or same_service(link_host, host)):
            raise EsperConfigError(
                f"refusing to follow a link to {origin_text(url)}: only "
                f"{self.text()} is trusted with the API key"
            )
        moved = url.copy_with(scheme=scheme, host=host, port=port)
        key = (origin_text(url), self.template(url.path))
        if key not in self._rewrites_logged:
            self._rewrites_logged.add(key)
            log.info(
                "a link for %s named %s: followed on the configured %s instead",
                key[1],
                key[0],
                self.text(),
            )
        return moved

    def template(self, path: str) -> str:
        """The route template of a path: relative to the base path, ids replaced by ``{id}``."""
        relative = path[len(self.base_path) :] or "/"
        return "/".join(
            "{id}" if looks_like_id(s) or s == self.enterprise_id else s
            for s in relative.split("/")
        )

    @staticmethod
    def is_tenant_level(route: str) -> bool:
        """True when the route names no record: a list route or the enterprise itself.

        ``/enterprise/{id}/devicegroup/`` and ``/v2/devices/`` are tenant-level (a 404 there means
        the enterprise id or the base URL is wrong); ``/v2/devices/{id}/device-apps/`` is not.
        """
        segments = route.split(" ", 1)[1].split("/")
        for index, segment in enumerate(segments):
            if segment == "{id}" and not (index > 0 and segments[index - 1] == "enterprise"):
                return False
        return True

    def text(self) -> str:
        scheme, host, port = self.origin
        return origin_text(httpx.URL(scheme=scheme, host=host, port=port))


def normalise_base_url(base_url: str) -> str:
    """Check the base URL and return it without a trailing slash.

    Raises:
        EsperConfigError: Not http(s), no host, credentials/query/fragment, or plain HTTP to a
            host that is not loopback.
    """
    text = (base_url or "").strip()
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise EsperConfigError(f"the base URL {text!r} is not a valid URL ({exc})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise EsperConfigError(
            f"the base URL {text!r} must look like https://<tenant>-api.esper.cloud/api"
        )
    if url.userinfo or url.query or url.fragment:
        raise EsperConfigError(
            "the base URL must not carry credentials, a query or a fragment: "
            f"{origin_text(url)}{url.path}"
        )
    if url.scheme == "http" and not is_loopback(url.host):
        raise EsperConfigError(
            f"refusing plain HTTP to {url.host}: the API key would travel unencrypted; use "
            "https:// (plain http is only allowed on loopback: 127.0.0.0/8, ::1, localhost)"
        )
    return str(url.copy_with(path=url.path.rstrip("/") or "/")).rstrip("/")


def check_enterprise_id(enterprise_id: str) -> str:
    """Return the enterprise id stripped of surrounding whitespace (as the key is); refuse one
    that is empty or not a single path segment (it is written into routes: `/enterprise/{id}/`).

    Raises:
        EsperConfigError: Empty, or holding `/`, `.`, spaces or other characters.
    """
    eid = (enterprise_id or "").strip()
    if not eid:
        raise EsperConfigError(
            "no enterprise id: set SOURCES__ESPER__ENTERPRISE_ID (the console's API Management "
            "page shows it)"
        )
    if not _ENTERPRISE_ID_RE.match(eid):
        raise EsperConfigError(
            f"the enterprise id {eid!r} is not one: expected letters, digits, '-' and '_' (a "
            "UUID such as 5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f; the console's API Management "
            "page shows it)"
        )
    return eid


def tls_setting_error(
    error: BaseException, origin: str, url_name: str = "SOURCES__ESPER__BASE_URL"
) -> EsperConfigError | None:
    """A failed TLS handshake that is the base URL's fault, as a setting error; else None.

    `https://` to a port that speaks plain HTTP (`WRONG_VERSION_NUMBER`), a certificate that
    does not verify, a protocol both ends do not share: the same answer on every attempt, so
    it is never retried.
    """
    current: BaseException | None = error
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLError) and not isinstance(current, _TRANSIENT_TLS):
            reason = getattr(current, "reason", None) or str(current)
            if isinstance(current, ssl.SSLCertVerificationError):
                hint = "its certificate could not be verified (is the host name right?)"
            elif reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "RECORD_LAYER_FAILURE"):
                hint = (
                    "the server there does not speak TLS: is the port a plain-HTTP one "
                    "(http:// instead of https://, or another port)?"
                )
            else:
                hint = "the server and this client share no TLS version or cipher"
            return EsperConfigError(
                f"the TLS handshake with {origin} failed ({reason}): {hint} Check the base "
                f"URL ({url_name}); nothing was retried"
            )
        current = current.__cause__ or current.__context__
    return None


# Name lookups that say the name does not exist (a setting), not that the resolver failed.
_NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def name_lookup_error(
    error: BaseException, origin: str, url_name: str = "SOURCES__ESPER__BASE_URL"
) -> EsperError | None:
    """A failed name lookup of the base URL's host, as the error that ends the request; else None.

    Never retried: the system's resolver has already asked again (resolv.conf's attempts), and
    a retry here only waited: 9 retries cost 1 min 50 s per tenant. A name that does not exist
    is the base URL's (a setting, exit 2); a resolver that did not answer is the network's (3).
    """
    current: BaseException | None = error
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror):
            said = current.strerror or str(current)
            if current.errno in _NO_SUCH_NAME:
                return EsperConfigError(
                    f"the host of {origin} is not known to DNS (name lookup: {said}): check the "
                    f"base URL ({url_name}); nothing was retried"
                )
            return EsperAPIError(
                f"the name lookup of {origin} failed ({said}): this machine's DNS resolver did "
                "not answer; nothing was retried, the next run asks again"
            )
        current = current.__cause__ or current.__context__
    return None


def check_key(api_key: str) -> str:
    """Return the key stripped of surrounding whitespace; refuse one unusable in a header."""
    key = (api_key or "").strip()
    if not key:
        raise EsperConfigError("no API key: set SOURCES__ESPER__API_KEY (or .dlt/secrets.toml)")
    if not _HEADER_SAFE_RE.match(key):
        raise EsperConfigError(
            "the API key contains characters that cannot be sent in an HTTP header "
            "(spaces, control or non-ASCII characters)"
        )
    keep_secret(key)
    return key


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def same_service(link_host: str, configured_host: str) -> bool:
    """Two API hosts of one service: both `*.esper.cloud` (tenants' API hosts), or both loopback."""
    if link_host.endswith(".esper.cloud") and configured_host.endswith(".esper.cloud"):
        return True
    return is_loopback(link_host) and is_loopback(configured_host)


def origin_of(url: httpx.URL) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the default port made explicit."""
    scheme = url.scheme.lower()
    return scheme, url.host.lower(), url.port or DEFAULT_PORTS.get(scheme)


def origin_text(url: httpx.URL) -> str:
    scheme, host, port = origin_of(url)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if port == DEFAULT_PORTS.get(scheme) else f":{port}")


def location_origin(location: str) -> str:
    """The origin a redirect points to, for an error message (never the full URL)."""
    try:
        target = httpx.URL(location)
    except httpx.InvalidURL:
        return "an unreadable location"
    return origin_text(target) if target.is_absolute_url else "a relative location"


def looks_like_id(segment: str) -> bool:
    """Numeric, UUID-like or long hex path segments are record ids."""
    return bool(segment.isdigit() or _UUID_RE.match(segment) or _LONG_HEX_RE.match(segment))
