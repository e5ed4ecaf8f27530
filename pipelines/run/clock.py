"""The run's "now": the API's `Date`, unless the API's own data and this machine's clock both
contradict it.

A run is as of the API time it read at its opening (`RunPlan.as_of`); every mart judges its
clock rules there and the freshness models order runs by it, so one night whose `Date` ran days
ahead would outrank the nights after it (their refusals read as current) and call every device
"not seen". A `Date` is contradicted when it runs more than `TOLERANCE` ahead of the newest time
the run's data carries (`RunLedger.data_clock`: the newest heartbeat, a nightly's newest device
update) and is also more than `TOLERANCE` from this machine's clock; the run is then as of its
newest data, and says so. Either check alone is not enough: a quiet fleet has old data under a
right clock, and a machine's clock may be wrong (or, against the simulator, months away).
"""

from __future__ import annotations

from datetime import datetime, timedelta

TOLERANCE = timedelta(hours=24)


def trusted_as_of(
    api: datetime | None, data: datetime | None, wall: datetime
) -> tuple[datetime | None, str | None]:
    """The run's as-of, and the words naming a `Date` that was not used (None: it was)."""
    if api is None or data is None or api - data <= TOLERANCE or abs(api - wall) <= TOLERANCE:
        return api, None
    ahead = (api - data).total_seconds() / 3600
    return data, (
        f"the API's Date ({api:%Y-%m-%d %H:%M} UTC) runs {ahead:.0f} h ahead of its newest data "
        f"and is {abs(api - wall).total_seconds() / 3600:.0f} h from this machine's clock: not "
        f"used; the run is as of its newest data, {data:%Y-%m-%d %H:%M} UTC"
    )
