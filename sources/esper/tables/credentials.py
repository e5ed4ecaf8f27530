"""Credentials that stop management when they expire: Apple push certificates, enrolment (DEP)
tokens and provisioning profiles. Small lists, read whole each run; a tenant without Apple
services refuses the routes (403/404) and the run goes on without them.

No live recording holds these routes: the shapes are Esper's OpenAPI files (esper-io/esper-cli
`spec/openapi/v0.yaml`, `v2.yaml`; docs/spec/openapi-notes-credentials-access.md). The expiry
is nested (`meta.cert_expiry_on`, `meta.token_expiry_on`) on the v0 routes and flattened here.
"""

from __future__ import annotations

from collections.abc import Iterator

import dlt
import pyarrow as pa

from ..common import Options
from ..http import EsperClient
from ..run.ledger import RunLedger
from ..table import JSON, TS, Col, Table, cols, flat
from .catalogues import optional_whole_list

APNS_CERTIFICATES = Table(
    "apns_certificates",
    "/tenant/v0/apnscertificates/",
    ("id",),
    disposition="replace",
    columns=(  # APNSCertInfo: no name; `apple_id` names it
        *cols("id apple_id state created_by updated_by"),
        Col("meta", JSON),
        *flat("meta__topic"),
        *flat("meta__cert_created_at meta__cert_expiry_on", TS),
        *cols("created_at updated_at", TS),
    ),
)
DEP_TOKENS = Table(
    "dep_tokens",
    "/tenant/v0/deptokens/",
    ("id",),
    disposition="replace",
    columns=(  # DEP_Token_GET; `meta.token_expiry_on` has no declared format: kept as text
        *cols("id token_name state created_by updated_by created_at updated_at"),
        Col("meta", JSON),
        *flat("meta__token_expiry_on"),
    ),
)
PROVISIONING_PROFILES = Table(
    "provisioning_profiles",
    "/v2/provisioning-profiles",
    ("id",),
    disposition="replace",
    columns=(  # ProvisioningProfileWithDownloadResponse (the current version's expiry)
        *cols("id version_id name team_identifier app_identifier profile_type tenant_id"),
        *cols("expiration_date created_at updated_at", TS),
    ),
)
TABLES = (APNS_CERTIFICATES, DEP_TOKENS, PROVISIONING_PROFILES)


@dlt.resource(**APNS_CERTIFICATES.hints())
def apns_certificates(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Apple push certificates: when one expires, no iOS, iPadOS or tvOS device gets commands."""
    yield from optional_whole_list(APNS_CERTIFICATES, client, ledger, opts)


@dlt.resource(**DEP_TOKENS.hints())
def dep_tokens(client: EsperClient, ledger: RunLedger, opts: Options) -> Iterator[pa.Table]:
    """Enrolment (DEP) tokens: when one expires, new Apple devices cannot enrol."""
    yield from optional_whole_list(DEP_TOKENS, client, ledger, opts)


@dlt.resource(**PROVISIONING_PROFILES.hints())
def provisioning_profiles(
    client: EsperClient, ledger: RunLedger, opts: Options
) -> Iterator[pa.Table]:
    """Provisioning profiles: when one expires, the in-house apps it signs stop launching."""
    yield from optional_whole_list(PROVISIONING_PROFILES, client, ledger, opts)


LISTS = (apns_certificates, dep_tokens, provisioning_profiles)
