"""Declared columns of every raw table (names are the API's own; see docs/contracts.md section 3).

Fields not declared here are still loaded (typed from their values); declaring a field fixes its
type, so a page where it is missing or null cannot change the table.
"""

from __future__ import annotations

from .arrow import Col, TableSchema, cols, flat
from .vocabulary import device_state_code, device_state_text

TS, INT, BOOL, JSON = "timestamp", "bigint", "bool", "json"

_DEVICE = (
    *cols("id name alias os platform serial os_version global_device_id tenant_id group_id"),
    # `state` is a code; a record that serves text ("inactive") keeps it in `state_text` too.
    Col("state", INT, convert=device_state_code),
    Col("state_text", path=("state",), convert=device_state_text),
    *cols("dpc_version eea_version managed_by provisioned_with template_name device_source"),
    *cols("created_by updated_by udid mqtt_topic fcm_id dep_profile dep_profile_status"),
    *cols("is_gms is_seamless is_esper_managed is_supervised is_locked_down is_ddm_enabled", BOOL),
    *cols("created_at updated_at provisioned_on last_seen", TS),
    *cols("dep_profile_push_time dep_profile_assign_time", TS),
    *cols("tags hardware_info software_info network_info memory_info network_stats", JSON),
    *cols("location_stats memory_stats cpu_stats blueprint_info battery_stats policy", JSON),
    *cols("enrolment_info tokens windows_config app_mode_meta foundation_info", JSON),
    *flat("hardware_info__brand hardware_info__model hardware_info__manufacturer"),
    *flat("software_info__security_patch_level software_info__os_build_number"),
    *flat("software_info__esper_agent_info__version_name"),
    *flat("blueprint_info__assigned_blueprint_id blueprint_info__current_blueprint_id"),
    *flat("blueprint_info__current_blueprint_version_id blueprint_info__blueprint_upgrade_status"),
    *flat("battery_stats__battery_level", INT),
)

_BLUEPRINT = (
    *cols("id name description comments version_id created_by updated_by"),
    *cols("version_number minor_version_number", INT),
    Col("publish", BOOL),
    Col("settings", JSON),
    *cols("created_at updated_at", TS),
)

# Apple apps (v2 device-apps, live §9): `bundle_id` and `apple_app_version` are their package and
# version (VPP and ESPER_IOS apps are in no tenant app list); staging reads them as such.
_DEVICE_APP = (
    *cols("id package_name app_name version_code version_name app_id app_version_id app_type"),
    *cols("bundle_id apple_app_version platform"),
    Col("device_families", JSON),
    *cols("state product_id device"),
    *cols("is_active whitelisted is_data_clearable is_uninstallable is_kiosk_app", BOOL),
    *cols("is_esper_controlled auto_update", BOOL),
    *cols("created_on updated_on created_at updated_at", TS),
)

SCHEMAS: dict[str, TableSchema] = {
    s.name: s
    for s in (
        TableSchema("devices", _DEVICE),
        TableSchema("device_history", _DEVICE),
        TableSchema(
            "device_census", (Col("id"), Col("updated_at", TS), Col("census_at", TS)), False
        ),
        TableSchema(
            "heartbeats", (Col("device_id"), Col("timestamp", TS), Col("status", INT)), False
        ),
        TableSchema(
            "groups",
            (
                *cols("id name parent path blueprint enterprise thumbnail"),
                *cols("device_count children_count", INT),
                Col("created_on", TS),
            ),
        ),
        TableSchema("blueprints", _BLUEPRINT),
        TableSchema("blueprint_versions", _BLUEPRINT),
        TableSchema(
            "tenant_apps",
            (
                *cols("id platform tenant_id package_name created_by updated_by"),
                *cols("created_at updated_at", TS),
            ),
        ),
        TableSchema(
            "tenant_app_versions",
            (
                *cols("id app_id app_type tenant_id app_name app_icon_url release_notes"),
                *cols("description version_name build_number version_code min_sdk_version"),
                *cols("created_by updated_by"),
                Col("file_size_in_kb", INT),
                *cols("is_active", BOOL),
                Col("device_family", JSON),
                *cols("created_at updated_at", TS),
            ),
        ),
        TableSchema(
            "applications",  # v1 items (live route 2); legacy-only fields stay declared, null
            (
                *cols("id application_name package_name developer category compatibility"),
                *cols("content_rating enterprise"),
                *cols("is_active is_hidden", BOOL),
                *cols("versions latest_version", JSON),
                *flat("latest_version__id latest_version__version_code"),
                *flat("latest_version__build_number latest_version__release_name"),
                *cols("created_on updated_on", TS),
            ),
        ),
        TableSchema(
            "application_versions",
            (
                *cols("id application_id version_code build_number hash_string min_sdk_version"),
                *cols("target_sdk_version download_url icon_url release_name release_comments"),
                *cols("application enterprise approval_status app_icon app_file"),
                *cols("installed_count size_in_mb", INT),
                *cols("is_enabled is_g_play is_default", BOOL),
                *cols("created_on updated_on release_date", TS),
            ),
        ),
        TableSchema("device_apps", (Col("device_id"), Col("route"), *_DEVICE_APP)),
        TableSchema(
            "command_requests",
            (
                *cols("id enterprise command_type command device_type schedule reason alias"),
                *cols("created_by issued_by"),
                *cols("command_args devices groups schedule_args status", JSON),
                *cols("created_at created_on updated_at", TS),
            ),
        ),
        TableSchema(
            "command_statuses",
            (
                *cols("id request device state reason command"),
                Col("requeue_value", INT),
                *cols("command_args issued_by command_meta", JSON),
                *cols("created_at updated_at created_on updated_on", TS),
            ),
        ),
        TableSchema(
            "operations",
            (
                *cols("id operation state alias reason schedule_type created_by updated_by"),
                *cols("schedule_args operation_device_query arguments", JSON),
                *cols("operation_stats operation_activity", JSON),
                *cols("created_at updated_at", TS),
            ),
        ),
        TableSchema(
            "operation_devices",
            (
                *cols("id operation_id device_id state reason"),
                Col("device_operation_activity", JSON),
                *cols("created_at updated_at", TS),
            ),
        ),
        TableSchema(
            "device_events",
            (
                Col("id", INT),
                *cols("device_id message_id device_status_id message device enterprise"),
                Col("created_on", TS),
            ),
        ),
        TableSchema(
            "status_metrics",  # a bare object of counters (live route 23) + the snapshot's day
            (
                Col("snapshot_date"),  # ISO date (UTC) of the API's clock: the key
                Col("as_of", TS),  # the API's time of the request
                *cols("recently_added low_battery under_provisioning unprovisioned_devices", INT),
                *cols("secure low_risk medium_risk high_risk total_devices_under_risk", INT),
                Col("unspecified", INT),
                Col("last_seen", JSON),
                *flat("last_seen__first_period last_seen__second_period", INT),
                *flat("last_seen__third_period", INT),
            ),
        ),
    )
}
