"""Esper's security state of a device (`security_state`; live routes 12, 13, 15).

The recordings hold one Android device, whose `security_state` is null on the three routes that
carry it. Esper's documents give the values and how they are reached: the console rates an Android
device from Google's integrity verdicts (basic integrity, CTS profile match) and the age of its
security patch, as high risk, medium risk, low risk or secure
(`esper-io/console_docs:docs/devices-groups/device-security.md` @864d68c), and Esper's device
documents carry it as a string, `"security_state": "LOW_RISK"`
(`esper-io/dev-docs:docs/home/eql/README.md` @18dbde3). The simulator serves that: null where no
verdict exists (Apple, Windows and Linux devices, and Android devices without Google Play services,
which give no integrity verdict: the recorded device's case), else the console's rules:
- basic integrity fails (about one device in 50): HIGH_RISK;
- CTS profile match fails (about one in 20 of the rest): MEDIUM_RISK;
- a security patch older than three months: LOW_RISK;
- otherwise SECURE.
The patch age is taken when the device record last changed (`updated_at`), so the state moves only
with a change the nightly load sees.
"""

from __future__ import annotations

import zlib
from datetime import UTC, date, datetime

from esper_warehouse.simulator import catalog as C
from esper_warehouse.simulator.fleet import Fleet

SECURITY_STATES = ("SECURE", "LOW_RISK", "MEDIUM_RISK", "HIGH_RISK")
BASIC_INTEGRITY_FAILS_ONE_IN = 50
CTS_PROFILE_FAILS_ONE_IN = 20
STALE_PATCH_DAYS = 90  # "greater than three months old"


def esper_security_state(f: Fleet, i: int) -> str | None:
    """The `security_state` Esper serves for device `i` (None: no verdict)."""
    if f.platform(i) != C.ANDROID or not f.is_gms[i] or f.patch[i] < 0:
        return None
    draw = zlib.crc32(f"{f.seed}:{f.serial[i]}:integrity".encode())
    if draw % BASIC_INTEGRITY_FAILS_ONE_IN == 0:
        return "HIGH_RISK"
    if (draw // BASIC_INTEGRITY_FAILS_ONE_IN) % CTS_PROFILE_FAILS_ONE_IN == 0:
        return "MEDIUM_RISK"
    patched = date.fromisoformat(f.patch_levels[f.patch[i]])
    assessed = datetime.fromtimestamp(f.updated[i], UTC).date()
    if (assessed - patched).days > STALE_PATCH_DAYS:
        return "LOW_RISK"
    return "SECURE"
