"""Credentials that stop management when they expire: Apple push certificates, enrolment (DEP)
tokens, app licence (VPP) tokens, and provisioning profiles with their versions. Small lists,
read whole each run; a tenant without Apple services refuses the routes (403/404) and the run
goes on without them.

No live recording holds these routes: the shapes are Esper's OpenAPI files (esper-io/esper-cli
`spec/openapi/v0.yaml`, `v2.yaml`; docs/spec/openapi-notes-credentials-access.md). The expiry
is nested (`meta.cert_expiry_on`, `meta.token_expiry_on`) on the v0 routes and flattened here.

Secrets stay out: the VPP token's `key` and the profiles' signed `download_url` are never loaded
(these tables load their declared columns only, `keep_extra=False`).

Expiry dates are read in any form the API may serve them: ISO 8601, a US date (`10/02/2026`,
month first: `times.us_date`), epoch seconds or milliseconds (`times.parse_time`); a value none
of these reads loads as NULL and counted, and its served text stays beside it (`meta`,
`meta__token_expiry_on`, `expiration_date_text`) so `marts.credential_expiry` calls it
`unreadable`. A list that serves one id twice keeps the copy that expires first (`_earliest`):
the one that stops management first is never hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import dlt
import pyarrow as pa

from ..common import Options, skip_unavailable
from ..http import EsperClient
from ..run.ledger import RunLedger
from ..table import BOOL, INT, JSON, TS, Col, Doc, Evidence, Table, cols, flat
from ..times import parse_time, us_date
from .catalogues import read_versions, shared_list

# The notes transcribed from Esper's OpenAPI files for these routes (none is recorded live)
NOTES = "openapi-notes-credentials-access.md"


def _expiry(record: dict, path: tuple[str, ...]) -> Any:
    value: Any = record
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    try:
        return parse_time(us_date(value))
    except (ValueError, OverflowError):
        return None


def _earliest(*path: str) -> Callable[[dict, dict], dict]:
    """`Table.prefer_copy`: of two copies of one credential, the one whose expiry (at `path`) is
    earliest; a copy whose expiry cannot be read gives way to one whose expiry can."""

    def prefer(kept: dict, other: dict) -> dict:
        mine, theirs = _expiry(kept, path), _expiry(other, path)
        return other if theirs is not None and (mine is None or theirs < mine) else kept

    return prefer


APNS_CERTIFICATES = Table(
    "apns_certificates",
    "/tenant/v0/apnscertificates/",
    ("id",),
    disposition="replace",
    columns=(  # APNSCertInfo: no name; `apple_id` names it
        *cols("id apple_id state created_by updated_by"),
        Col("meta", JSON),
        *flat("meta__topic"),
        *flat("meta__cert_created_at", TS),
        Col("meta__cert_expiry_on", TS, ("meta", "cert_expiry_on"), convert=us_date),
        *cols("created_at updated_at", TS),
    ),
    prefer_copy=_earliest("meta", "cert_expiry_on"),
    doc=Doc(
        read="(spec: esper-cli `v0.yaml` `APNSCertInfo`; no live recording)",
        kept="replaced each run; `meta__cert_expiry_on` is the expiry (ISO 8601, a US date or "
        "epoch seconds or milliseconds; NULL, counted, when none of these reads it: `meta` keeps "
        "it as served), `apple_id` names the certificate. A list that serves one id twice keeps "
        "the copy that expires first (as do the other credential tables), and is not a "
        "reconciliation shortfall. A tenant without Apple services (403/404) skips the table and "
        "keeps the last list (exit 6)",
        envelope="`{code, message, content: {count, previous, next, results}}`",
        evidence=Evidence(NOTES, "esper-cli v0.yaml"),
    ),
    whole_list="own",
)
DEP_TOKENS = Table(
    "dep_tokens",
    "/tenant/v0/deptokens/",
    ("id",),
    disposition="replace",
    columns=(  # DEP_Token_GET; `meta.token_expiry_on` has no declared format: kept as served
        *cols("id token_name state created_by updated_by created_at updated_at"),
        Col("meta", JSON),
        *flat("meta__token_expiry_on"),
        # the same, read as a time (NULL, counted, when it cannot be read)
        Col("token_expires_at", TS, ("meta", "token_expiry_on"), convert=us_date),
    ),
    prefer_copy=_earliest("meta", "token_expiry_on"),
    doc=Doc(
        read="(spec: `DEP_Token_GET`)",
        kept="replaced each run; `token_name`, `meta__token_expiry_on` (text as served: the spec "
        "declares no format), `token_expires_at` (the same read as a time, in the forms "
        "`apns_certificates` reads; NULL, counted, when it cannot be). Skipped like "
        "`apns_certificates`",
        envelope="`{code, message, content: {count, prev, next, results}}`",
        evidence=Evidence(NOTES, "esper-cli v0.yaml"),
    ),
    whole_list="own",
)
PROVISIONING_PROFILES = Table(
    "provisioning_profiles",
    "/v2/provisioning-profiles",
    ("id",),
    disposition="replace",
    columns=(  # ProvisioningProfileWithDownloadResponse (the current version's expiry)
        *cols("id version_id name team_identifier app_identifier profile_type tenant_id"),
        Col("expiration_date", TS, convert=us_date),
        Col("expiration_date_text", path=("expiration_date",)),  # as served
        *cols("created_at updated_at", TS),
    ),
    keep_extra=False,  # `download_url` is a signed link to the profile: not kept
    prefer_copy=_earliest("expiration_date"),
    doc=Doc(
        read="(spec: `ProvisioningProfileWithDownloadResponse`)",
        kept="replaced each run; `name`, `profile_type`, `app_identifier`, `expiration_date` (of "
        "the current version; read in the forms `apns_certificates` reads), "
        "`expiration_date_text` (as served). Skipped like `apns_certificates`. The signed "
        "`download_url` is never loaded",
        envelope="content-list (`prev`)",
        evidence=Evidence(NOTES, "esper-cli v2.yaml"),
    ),
    whole_list="shared",
)
VPP_TOKENS = Table(
    "vpp_tokens",
    "/tenant/v0/vpptokens/",
    ("id",),
    disposition="replace",
    columns=(  # VPPToken: no name, state or expiry declared; `key` (the token) is left out
        *cols("id tenant_id created_by updated_by"),
        *cols("created_at updated_at", TS),
    ),
    keep_extra=False,
    doc=Doc(
        read="(spec: `VPPToken`)",
        kept="replaced each run; which app licence tokens exist (the spec declares no name, "
        "state or expiry: `marts.credential_expiry` lists each as `unknown`). The token itself "
        "(`key`) is never loaded. Skipped like `apns_certificates`",
        envelope="`{code, message, content: {count, previous, next, results}}`; items carry the "
        "token (`key`), which the source drops",
        evidence=Evidence(NOTES, "esper-cli v0.yaml"),
    ),
    whole_list="own",
)
PROVISIONING_PROFILE_VERSIONS = Table(
    "provisioning_profile_versions",
    "/v2/provisioning-profiles/{id}/versions",
    ("id",),
    disposition="replace",
    parent="provisioning_profiles",
    columns=(  # ProvisioningProfileVersionWithDownloadResponse, without `download_url`
        *cols("id profile_id uuid name sha256_hash tenant_id created_by updated_by"),
        *cols("platforms entitlements developer_certificates"),  # JSON encoded as text
        Col("time_to_live", INT),
        *cols("provisions_all_devices is_xcode_managed", BOOL),
        Col("expiration_date", TS, convert=us_date),
        *cols("creation_date created_at updated_at", TS),
    ),
    keep_extra=False,
    prefer_copy=_earliest("expiration_date"),
    doc=Doc(
        read="(spec: `ProvisioningProfileVersionWithDownloadResponse`), per profile",
        kept="replaced each run (one request per profile; the profile list is shared with "
        "`provisioning_profiles`); `profile_id`, `uuid`, `expiration_date`, `time_to_live`, "
        "`provisions_all_devices`; no `download_url`. A refused route skips this table alone; a "
        "profile whose versions are refused keeps the table as it was (exit 6)",
        envelope="v2-list (`prev`), newest expiry first; 404 for an unknown profile",
        evidence=Evidence(NOTES, "esper-cli v2.yaml"),
    ),
)
TABLES = (
    APNS_CERTIFICATES, DEP_TOKENS, VPP_TOKENS, PROVISIONING_PROFILES, PROVISIONING_PROFILE_VERSIONS,
)  # fmt: skip


@dlt.resource(**PROVISIONING_PROFILE_VERSIONS.hints())
def provisioning_profile_versions(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Every version of every provisioning profile (the API orders them by expiry, newest first).

    A plain resource sharing the profile list read this run (`shared_list`), not a transformer:
    a refused route then skips this table and keeps its rows (dlt empties the `replace` table of
    a transformer whose parent yielded nothing).
    """
    with skip_unavailable(ledger, PROVISIONING_PROFILE_VERSIONS.name):
        profiles = shared_list(PROVISIONING_PROFILES, client, ledger, opts)
        ids = [profile["id"] for profile in PROVISIONING_PROFILES.require(profiles.items, ledger)]
        yield from read_versions(
            PROVISIONING_PROFILE_VERSIONS, PROVISIONING_PROFILES, ids, client, ledger, opts
        )


LISTS = (provisioning_profile_versions,)  # the whole lists' resources: `Table.whole_list`
