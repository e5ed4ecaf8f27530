"""What an answer that is never retried means: the key, the enterprise id, or a missing capability."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from .answers import api_message
from .errors import (
    UNAVAILABLE_MEANING,
    EsperAPIError,
    EsperAuthError,
    EsperError,
    EsperNotFoundError,
    EsperUnavailableError,
)
from .origin import location_origin

if TYPE_CHECKING:
    from .client import EsperClient


def final_error(route: str, response: httpx.Response, client: EsperClient) -> EsperError:
    """The error for an answer that is never retried (401/403, 404, 3xx, other 4xx).

    What it says depends on what the run has proven: before the key and the enterprise id are
    proven, a 401/403 is the key and a tenant-level 404 the enterprise id or base URL; after,
    a 403 or a tenant-level 404 is a missing capability (`EsperUnavailableError`): a scope, a
    plan feature, a platform. Never a setting that other requests proved right.
    """
    status = response.status_code
    if client.settings_proven and (
        status == 403 or (status == 404 and client.origin.is_tenant_level(route))
    ):
        return EsperUnavailableError(
            f"{route} answered {status} ({UNAVAILABLE_MEANING[status]})",
            table="",  # the resource that asked names its table (common.skip_unavailable)
            reason=UNAVAILABLE_MEANING[status],
            status=status,
            route=route,
        )
    if status in (401, 403):
        return EsperAuthError(
            f"the API key was refused (HTTP {status}) by {client.origin.text()}: check the "
            f"key ({client.key_name}) and that it belongs to this tenant",
            status=status,
            route=route,
        )
    message = api_message(response, client.redact)
    if status == 404:
        if client.origin.is_tenant_level(route):
            eid = (
                f"the enterprise id ({client.enterprise_id})"
                if client.enterprise_id
                else "the enterprise id (none configured)"
            )
            text = (
                f"{route} answered 404 Not Found{message}: {eid} or the base URL "
                f"({client.base_url}) is probably wrong"
            )
            return EsperNotFoundError(text, route=route, tenant_level=True)
        return EsperNotFoundError(
            f"{route} answered 404 Not Found{message} (the record may have been removed)",
            route=route,
        )
    if 300 <= status < 400:
        where = location_origin(response.headers.get("location", ""))
        return EsperAPIError(
            f"{route} answered an unexpected redirect (HTTP {status}) to {where}; "
            "redirects are not followed (check the base URL)",
            status=status,
            route=route,
        )
    return EsperAPIError(
        client.redact(f"{route} answered HTTP {status}{message}"), status=status, route=route
    )
