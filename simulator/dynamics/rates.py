"""The simulator's rates: how much of the fleet changes per simulated day, and how.

Every per-day volume is a rate per live device (or per 1,000 devices), so the daily changed
share does not depend on the fleet size; the minimum fleets keep a small test fleet busy.
"""

HISTORY_DAYS = 30  # the generated fleet already has this much history before `start`

# Rates per simulated day (fractions of the live fleet unless noted).
MISC_CHANGE_RATE = 0.008
# Rollouts: the tenant's update service delivers to about this share of the fleet per day (in
# working hours), shared by the running campaigns; each campaign also reaches at most
# CAMPAIGN_WAVE_PER_DAY of its own targets per day. A release reaches every eligible device
# (5 to 25 % of the fleet) region by region, one campaign per region, over days to weeks.
ROLLOUT_RATE = 0.016  # deliveries attempted; dark, failed and removed targets change nothing
CAMPAIGN_WAVE_PER_DAY = 0.3  # share of a campaign's targets reached per day, at most
RELEASES_PER_DAY = 0.35  # new OS/patch targets, app and blueprint versions (any fleet size)
CAMPAIGNS_PER_DAY = 0.2  # new campaigns per day while the running ones can use the capacity
CAMPAIGNS_PER_DAY_IDLE = 4.0  # ... and while they cannot (too few targets left for 3 days)
MIN_ACTIVITY_FLEET = 150  # device changes and rollouts: rates on at least this many devices
# Commands and operations: per 1,000 live devices, and at least as many as a 4,000-device fleet
# gets (a small test fleet still sees a command most days). A command reaches ~45 devices on
# average (~85 at 100,000 devices, where a store group is larger), so together with the status
# changes of the days after, they touch ~1.5-3 % of the fleet a day, on top of the ~2 % changed.
COMMANDS_PER_1000 = 0.25
OPERATIONS_PER_1000 = 0.1
MIN_ADMIN_FLEET = 4000
ENROLL_RATE = 0.001
REMOVE_RATE = 0.0005
DARK_RATE = 0.002
RETURN_RATE = 0.001
