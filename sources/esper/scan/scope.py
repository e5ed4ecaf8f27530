"""Which devices a full scan re-reads one by one: on the first load all, later the changed ones.

An explicit `run --full` re-reads everything. The scheduled full scan (every
`full_scan_interval_days`, 7 by default) re-reads every list and count: devices (with the census that finds
removed devices), heartbeats, groups, catalogues, commands. Its per-device fan-outs (installed
apps, event feeds: ~2 requests per device, 99 % of a first load) are re-read only for the devices
that something says changed since the warehouse last saw them: a device whose `updated_at` in
the complete list differs from the one the warehouse holds, or that the warehouse does not hold;
plus the devices with command or operation activity and the nightly's watermark rule for feeds.
So that a change the API made without moving `updated_at` cannot hide for ever, each full scan
also re-reads a rotating slice of `1 / ROTATION` of the fleet whole (apps and the whole feed):
every device once in `ROTATION` scans. Arithmetic in docs/decisions.md ("The weekly full scan").
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import dlt

from ..times import parse_time

log = logging.getLogger("esper_warehouse.source")

ROTATION = 20  # each full scan re-reads 1/20 of the fleet whole: every device within 20 scans


def stored_versions() -> dict[str, datetime | None] | None:
    """Device id -> `updated_at` the warehouse holds; None when unknown (first load, no table)."""
    try:
        pipeline = dlt.current.pipeline()
        with pipeline.sql_client() as client:
            if not client.has_dataset():
                return None
            table = client.make_qualified_table_name("devices")
            rows = client.execute_sql(f"select id, updated_at from {table}")
    except Exception as error:  # no devices table yet: every device is re-read
        log.info("full scan: no device versions in the warehouse (%s): re-reading every device",
                 type(error).__name__)  # fmt: skip
        return None
    return {str(i): parse_time(u) for i, u in rows or []} or None


@dataclass(frozen=True)
class FanOutScope:
    """The full scan's per-device decision; `stored` None means every device (first load)."""

    stored: dict[str, datetime | None] | None
    slot: int | None  # which 1/ROTATION of the fleet this scan re-reads whole (None: no slice)

    @property
    def everything(self) -> bool:
        return self.stored is None

    def in_rotation(self, device_id: str) -> bool:
        return self.slot is not None and zlib.crc32(device_id.encode()) % ROTATION == self.slot

    def needs(self, item: dict[str, Any]) -> bool:
        """Whether a listed device's apps and feed are re-read in this scan."""
        if self.stored is None:
            return True
        device_id = str(item.get("id"))
        if device_id not in self.stored or self.in_rotation(device_id):
            return True
        return self.stored[device_id] != parse_time(item.get("updated_at"))


def fan_out_scope(
    as_of: datetime | None, *, everything: bool = False, rotate: bool = True
) -> FanOutScope:
    """The scope of a full scan starting now (`as_of`: the API's time picks the rotation slot).

    `everything`: every device (an explicit `run --full` re-reads the whole tenant).
    `rotate`: re-read a slice whole. Not while a first load is unfinished: a run that resumes
    one (`walk.py`) re-reads only the devices the warehouse does not hold yet.
    """
    slot = int(as_of.timestamp() // (7 * 86400)) % ROTATION if as_of else 0
    return FanOutScope(None if everything else stored_versions(), slot if rotate else None)
