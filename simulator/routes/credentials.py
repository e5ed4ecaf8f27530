"""Credentials that expire: Apple push certificates, enrolment (DEP) and app licence (VPP) tokens,
provisioning profiles and their versions.

The area whole in one module: records shaped like Esper's OpenAPI files (no live recording; see
docs/spec/openapi-notes-credentials-access.md), the routes and their truth (`AREA`). Expiry dates
are absolute simulated times, fixed on first use relative to the clock then: by default one push
certificate expires in 20 days, one enrolment token expired 3 days ago and another has 200 days
left, and two profiles have 90 and 12 days (each with an older version that expired a year before
its current one). `set_expiry` replaces them, and `serve_expiry` serves them in another form (a US
date, epoch seconds or milliseconds, words) or lists every credential of a kind under one id
(tests). The VPP token (no expiry in the spec) carries its secret `key`, and the profiles a signed
`download_url`, as the spec describes: the warehouse must not keep either.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from esper_warehouse.simulator.fleet import DAY, derived_id
from esper_warehouse.simulator.http import V2, ApiError, Req
from esper_warehouse.simulator.routes.area import Area, Route
from esper_warehouse.simulator.routes.envelopes import Body, content_list, ok, v2_list
from esper_warehouse.simulator.state import World
from esper_warehouse.simulator.timeutil import iso
from esper_warehouse.sources.esper.tables.credentials import (
    APNS_CERTIFICATES,
    DEP_TOKENS,
    PROVISIONING_PROFILES,
    VPP_TOKENS,
)

DEFAULT_DAYS = {
    "apns_certificates": (20.0,),
    "dep_tokens": (-3.0, 200.0),
    "provisioning_profiles": (90.0, 12.0),
}
PROFILE_TYPES = ("enterprise", "ad-hoc", "app-store", "development")
VPP_KEY_PREFIX = "vpp-stoken-secret-"  # the token itself: tests look for it in the warehouse
OLDER_VERSION_DAYS = 365  # each profile's previous version expired this long before its current


# How an expiry (epoch seconds) may be served: the spec declares date-time text (or, for DEP
# tokens, no format at all); these are the other forms a client must read or call unreadable.
FORMS: dict[str, Callable[[int], Any]] = {
    "iso": iso,
    "us": lambda t: datetime.fromtimestamp(t, UTC).strftime("%m/%d/%Y"),  # month first
    "epoch_s": lambda t: t,
    "epoch_ms": lambda t: t * 1000,
    "words": lambda _t: "next spring",
}


def serve_expiry(w: World, kind: str, form: str = "iso", *, one_id: bool = False) -> None:
    """Serve the expiries of `kind` in `form` (`FORMS`); `one_id`: every credential of the kind
    listed under the first one's id (a list serving one id twice)."""
    with w.lock:
        _forms(w)[kind] = (FORMS[form], one_id)


def _forms(w: World) -> dict[str, tuple[Callable[[int], Any], bool]]:
    if not hasattr(w, "credential_forms"):
        w.credential_forms = {}  # type: ignore[attr-defined]
    return w.credential_forms  # type: ignore[attr-defined,no-any-return]


def _served(w: World, kind: str, expires: int) -> Any:
    return _forms(w).get(kind, (iso, False))[0](expires)


def _id(w: World, kind: str, prefix: str, k: int) -> str:
    return derived_id(prefix, w.fleet.seed, 0 if _forms(w).get(kind, (iso, False))[1] else k)


def set_expiry(w: World, kind: str, days: list[float]) -> None:
    """The credentials of `kind` expire `days` days from the simulated now, one each."""
    with w.lock:
        _expiries(w)[kind] = [w.now + round(d * DAY) for d in days]


def _expiries(w: World) -> dict[str, list[int]]:
    if not hasattr(w, "credential_expiries"):
        w.credential_expiries = {  # type: ignore[attr-defined]
            kind: [w.now + round(d * DAY) for d in days] for kind, days in DEFAULT_DAYS.items()
        }
    return w.credential_expiries  # type: ignore[attr-defined,no-any-return]


def _created(w: World, expires: int) -> int:
    return min(w.now, expires) - 300 * DAY


def apns_certificates(w: World) -> list[dict]:
    """`APNSCertInfo` records: the expiry sits in `meta.cert_expiry_on`; `apple_id` names them."""
    return [
        {
            "id": _id(w, "apns_certificates", "apns", k),
            "apple_id": f"mdm-admin{k + 1}@example.com",
            "meta": {
                "topic": f"com.apple.mgmt.External.{derived_id('topic', w.fleet.seed, k)}",
                "cert_created_at": iso(_created(w, expires)),
                "cert_expiry_on": _served(w, "apns_certificates", expires),
            },
            "state": "COMPLETED",
            "created_by": w.fleet.users[0],
            "updated_by": w.fleet.users[0],
            "created_at": iso(_created(w, expires)),
            "updated_at": iso(_created(w, expires)),
        }
        for k, expires in enumerate(_expiries(w)["apns_certificates"])
    ]


def dep_tokens(w: World) -> list[dict]:
    """`DEP_Token_GET` records: the expiry sits in `meta.token_expiry_on`."""
    return [
        {
            "id": _id(w, "dep_tokens", "dep", k),
            "token_name": f"Apple Business Manager {k + 1}",
            "meta": {"token_expiry_on": _served(w, "dep_tokens", expires)},
            "state": "COMPLETED",
            "created_by": w.fleet.users[k % len(w.fleet.users)],
            "updated_by": w.fleet.users[k % len(w.fleet.users)],
            "created_at": iso(_created(w, expires)),
            "updated_at": iso(_created(w, expires)),
        }
        for k, expires in enumerate(_expiries(w)["dep_tokens"])
    ]


def provisioning_profiles(w: World) -> list[dict]:
    """`ProvisioningProfileWithDownloadResponse` records (the current version's expiry)."""
    return [
        {
            "id": _id(w, "provisioning_profiles", "profile", k),
            "version_id": derived_id("profile-version", w.fleet.seed, k),
            "name": f"In-house apps {k + 1}",
            "team_identifier": "A1B2C3D4E5",
            "app_identifier": f"A1B2C3D4E5.com.example.inhouse{k + 1}",
            "profile_type": PROFILE_TYPES[k % len(PROFILE_TYPES)],
            "expiration_date": _served(w, "provisioning_profiles", expires),
            "tenant_id": w.fleet.tenant_id,
            "created_at": iso(_created(w, expires)),
            "updated_at": iso(_created(w, expires)),
            "download_url": f"https://downloads.example.invalid/profiles/{k + 1}.mobileprovision",
        }
        for k, expires in enumerate(_expiries(w)["provisioning_profiles"])
    ]


def vpp_tokens(w: World) -> list[dict]:
    """`VPPToken` records: no name, state or expiry; `key` is the token (a secret)."""
    return [
        {
            "id": derived_id("vpp", w.fleet.seed, k),
            "tenant_id": w.fleet.tenant_id,
            "key": f"{VPP_KEY_PREFIX}{derived_id('vpp-key', w.fleet.seed, k)}",
            "meta": {},
            "created_by": w.fleet.users[0],
            "updated_by": w.fleet.users[0],
            "created_at": iso(w.now - 200 * DAY),
            "updated_at": iso(w.now - 200 * DAY),
        }
        for k in range(1)
    ]


def provisioning_profile_versions(w: World) -> list[dict]:
    """Every profile's versions, `ProvisioningProfileVersionWithDownloadResponse`, newest expiry
    first (the order the spec documents): the current one, then one that expired earlier."""
    versions = []
    expiries = _expiries(w)["provisioning_profiles"]
    for profile, expires in zip(provisioning_profiles(w), expiries, strict=True):
        for n, (vid, exp) in enumerate(
            (
                (profile["version_id"], expires),
                (derived_id("old-version", profile["id"]), expires - OLDER_VERSION_DAYS * DAY),
            )
        ):
            versions.append(
                {
                    "id": vid,
                    "profile_id": profile["id"],
                    "uuid": derived_id("apple-uuid", vid),
                    "name": f"{profile['name']} v{2 - n}",
                    "sha256_hash": derived_id("sha", vid).replace("-", "") * 2,
                    "creation_date": iso(exp - 365 * DAY),
                    "expiration_date": _served(w, "provisioning_profiles", exp),
                    "time_to_live": 365,
                    "provisions_all_devices": profile["profile_type"] == "enterprise",
                    "is_xcode_managed": False,
                    "platforms": '["iOS"]',
                    "entitlements": '{"get-task-allow": false}',
                    "developer_certificates": "[]",
                    "tenant_id": w.fleet.tenant_id,
                    "created_by": w.fleet.users[0],
                    "updated_by": w.fleet.users[0],
                    "created_at": iso(exp - 365 * DAY),
                    "updated_at": iso(exp - 365 * DAY),
                    "download_url": f"https://downloads.example.invalid/versions/{vid}?sig=secret",
                }
            )
    return versions


def _apns_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /tenant/v0/apnscertificates/: `{code, message, content: {count, previous, next, results}}`."""
    items = apns_certificates(w)
    return 200, ok(content_list(req, items, lambda r: r, "previous", 10))


def _dep_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /tenant/v0/deptokens/: the same envelope with `prev` (as the spec writes it)."""
    return 200, ok(content_list(req, dep_tokens(w), lambda r: r, "prev", 10))


def _profile_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/provisioning-profiles: `{content: {count, next, prev, results}}`."""
    return 200, v2_list(req, provisioning_profiles(w), lambda r: r, 10)


def _vpp_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /tenant/v0/vpptokens/: `{code, message, content: {count, previous, next, results}}`."""
    return 200, ok(content_list(req, vpp_tokens(w), lambda r: r, "previous", 10))


def _version_list(w: World, req: Req) -> tuple[int, Body]:
    """GET /v2/provisioning-profiles/{id}/versions: v2 list; 404 for an unknown profile."""
    profile = req.params["id"]
    if profile not in {p["id"] for p in provisioning_profiles(w)}:
        raise ApiError(404, f"Provisioning profile {profile} not found")
    items = [v for v in provisioning_profile_versions(w) if v["profile_id"] == profile]
    return 200, v2_list(req, items, lambda r: r, 10)


AREA = Area(
    routes=(
        Route("GET", APNS_CERTIFICATES.path, V2, _apns_list),
        Route("GET", DEP_TOKENS.path, V2, _dep_list),
        Route("GET", VPP_TOKENS.path, V2, _vpp_list),
        Route("GET", PROVISIONING_PROFILES.path, V2, _profile_list),
        Route("GET", "/v2/provisioning-profiles/{id}/versions", V2, _version_list),
    ),
    truth={
        "apns_certificates": apns_certificates,
        "dep_tokens": dep_tokens,
        "vpp_tokens": vpp_tokens,
        "provisioning_profiles": provisioning_profiles,
        "provisioning_profile_versions": provisioning_profile_versions,
    },
)
