"""The fleet's state, held compactly, and its deterministic generation from a seed.

Devices are columns of small integers (indexes into :mod:`simulator.catalog` and into the
catalogues generated here), so a 100,000-device fleet costs tens of megabytes. Wire records
are built on request by :mod:`simulator.wire`; :mod:`simulator.dynamics` moves the state on.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from esper_warehouse.simulator import catalog as C

DAY = 86_400
HOUR = 3_600


def new_id(rng: random.Random) -> str:
    """A random (version 4) UUID string drawn from ``rng``."""
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def derived_id(*parts: object) -> str:
    """A stable UUID-shaped id derived from ``parts`` (for records built on request)."""
    h = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


@dataclass(slots=True)
class Group:
    """A device group (tree node)."""

    id: str
    name: str
    parent: int  # index, -1 for the root
    path: str
    created: int
    blueprint: int  # blueprint index
    children: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Version:
    """A version of an app or a blueprint (index ``number`` - 1 in its parent's list)."""

    id: str
    number: int
    name: str
    code: str
    created: int
    updated: int


@dataclass(slots=True)
class App:
    """A legacy Android application or a tenant (Apple/Windows) app."""

    id: str
    name: str
    package: str
    platform: int
    kind: str  # legacy app_type (ENTERPRISE/PLAYSTORE/PRELOADED) or TENANT_IOS/TENANT_WINDOWS
    category: str
    created: int
    updated: int
    versions: list[Version] = field(default_factory=list)


@dataclass(slots=True)
class Blueprint:
    """A blueprint; its latest version is ``versions[-1]``."""

    id: str
    name: str
    os: int
    created: int
    updated: int
    versions: list[Version] = field(default_factory=list)


@dataclass(slots=True)
class CommandRequest:
    """A command request (immutable once issued)."""

    id: str
    command: int  # index into catalog.COMMANDS
    devices: list[int]
    group: int  # -1 for DEVICE requests
    schedule: str
    created: int
    created_by: str
    statuses: list[int] = field(default_factory=list)
    args: dict[str, object] | None = None  # None: the catalogue's template for the command
    install: tuple[int, int] | None = None  # (legacy app, version) an INSTALL puts on success


@dataclass(slots=True)
class CommandStatus:
    """The per-device status of a command request; ``plan`` is its remaining path."""

    id: str
    request: int
    device: int
    state: int
    created: int
    updated: int
    reason: str = ""
    plan: list[tuple[int, int]] = field(default_factory=list)  # (time, state)


@dataclass(slots=True)
class Operation:
    """A tenant operation (CONVERGE) with its per-device parts."""

    id: str
    alias: str
    state: int
    created: int
    updated: int
    created_by: str
    devices: list[int]
    activity: list[tuple[str, int]] = field(default_factory=list)
    parts: list[int] = field(default_factory=list)  # indexes into Fleet.op_devices
    plan: list[tuple[int, int]] = field(default_factory=list)


@dataclass(slots=True)
class OperationDevice:
    """One device's part of an operation."""

    id: str
    operation: int
    device: int
    state: int
    created: int
    updated: int
    reason: str = ""
    activity: list[tuple[str, int]] = field(default_factory=list)
    plan: list[tuple[int, int]] = field(default_factory=list)


class Fleet:
    """Every entity the simulated tenant holds, plus the helpers that change them.

    Per-device attributes are parallel lists indexed by device number; removed devices keep
    their slot (``removed[i]`` is True) and vanish from every list the API serves.
    """

    def __init__(self, seed: int, enterprise_id: str, tenant_id: str) -> None:
        self.seed = seed
        self.enterprise_id = enterprise_id
        self.tenant_id = tenant_id
        self.now = 0
        self.version = 0  # bumped on every change, invalidates cached orderings
        self._installs: tuple[int, dict[tuple[int, int], list[int]]] = (-1, {})
        self.groups: list[Group] = []
        self.blueprints: list[Blueprint] = []
        self.bp_versions: list[tuple[int, int]] = []  # global index -> (blueprint, version idx)
        self.bp_global: list[list[int]] = []  # blueprint -> global version indexes
        self.leaf_groups: list[int] = []
        self.legacy_apps: list[App] = []
        self.tenant_apps: list[App] = []
        self.users = [new_id(random.Random(f"{seed}:user:{k}")) for k in range(4)]
        # device columns
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.os: list[int] = []
        self.model: list[int] = []
        self.serial: list[str] = []
        self.name: list[str] = []
        self.alias: list[str] = []
        self.state: list[int] = []
        self.group: list[int] = []
        self.osv: list[int] = []
        self.patch: list[int] = []  # index into self.patch_levels, -1 when not Android
        self.patch_levels: tuple[str, ...] = ()
        self.agent: list[int] = []
        self.battery: list[int] = []
        self.is_gms: list[bool] = []
        self.bp_assigned: list[int] = []
        self.bp_current: list[int] = []
        self.bp_ver: list[int] = []
        self.bp_status: list[int] = []
        self.tags: list[tuple[str, ...]] = []
        self.created: list[int] = []
        self.provisioned: list[int] = []
        self.updated: list[int] = []
        self.last_seen: list[int] = []
        self.checkin: list[int] = []
        self.dark: list[bool] = []
        self.removed: list[bool] = []
        # installed apps per device: tuples (app index, version index, created, updated)
        self.apps: list[list[tuple[int, int, int, int]]] = []
        # event feed per device: tuples (event id, time, kind, a, b), oldest first
        self.events: list[list[tuple[int, int, int, int, int]]] = []
        self.next_event_id = 1
        self.commands: list[CommandRequest] = []
        self.statuses: list[CommandStatus] = []
        self.status_index: dict[str, int] = {}
        self.command_index: dict[str, int] = {}
        self.operations: list[Operation] = []
        self.op_devices: list[OperationDevice] = []
        self.operation_index: dict[str, int] = {}

    # -- small helpers -------------------------------------------------------------------

    def platform(self, i: int) -> int:
        """Platform code (catalog.ANDROID ...) of device ``i``."""
        return C.OS_PLATFORM[self.os[i]]

    def installed_on(self, k: int, v: int) -> list[int]:
        """Live Android devices with version ``v`` of legacy app ``k`` installed (created order).

        One pass over the fleet per change (``version``), not one per app version asked for: a
        v1 version list answers every version's ``installed_count``.
        """
        if self._installs[0] != self.version:
            index: dict[tuple[int, int], list[int]] = {}
            for i in self.live():
                if self.platform(i) == C.ANDROID:
                    for e in self.apps[i]:
                        index.setdefault((e[0], e[1]), []).append(i)
            self._installs = (self.version, index)
        return self._installs[1].get((k, v), [])

    def installed_count(self, k: int, v: int) -> int:
        """How many live devices have version ``v`` of legacy app ``k`` installed."""
        return len(self.installed_on(k, v))

    def live(self) -> list[int]:
        """Indexes of the devices the API serves (not removed)."""
        removed = self.removed
        return [i for i in range(len(self.ids)) if not removed[i]]

    def touch(self, i: int, ts: int, kind: int = C.EV_CHANGED, a: int = 0, b: int = 0) -> None:
        """Record a change of device ``i`` at ``ts``: bump updated_at, add an event."""
        self.updated[i] = max(ts, self.updated[i] + 1)
        if not self.dark[i]:
            self.last_seen[i] = max(self.last_seen[i], ts)
        self.add_event(i, ts, kind, a, b)
        self.version += 1

    def add_event(self, i: int, ts: int, kind: int, a: int = 0, b: int = 0) -> None:
        """Append an event-feed entry for device ``i``."""
        self.events[i].append((self.next_event_id, ts, kind, a, b))
        self.next_event_id += 1

    def add_device(
        self, rng: random.Random, created: int, *, seen: bool = True, not_after: int | None = None
    ) -> int:
        """Generate one device created at ``created``; returns its index.

        With ``not_after``, every time of the new device (provisioning, apps) is clamped to it.
        """
        i = len(self.ids)
        r = rng.random()
        acc = 0.0
        os_ = 0
        for k, (_n, _p, share) in enumerate(C.OSES):
            acc += share
            if r < acc:
                os_ = k
                break
        plat = C.OS_PLATFORM[os_]
        did = new_id(rng)
        self.ids.append(did)
        self.index[did] = i
        self.os.append(os_)
        self.model.append(rng.choice(C.MODELS_BY_OS[os_]))
        serial = f"{'RZ8AQWGTXJC5HF'[os_ * 2 : os_ * 2 + 2]}{rng.getrandbits(40):010X}"
        self.serial.append(serial)
        self.name.append(f"ESR-{serial[-8:]}")
        self.alias.append(f"{C.OS_NAMES[os_]}-{i:06d}" if rng.random() < 0.6 else "")
        self.state.append(_initial_state(rng.random(), plat))
        leaves = self.leaf_groups
        g = rng.choice(leaves) if rng.random() < 0.92 else rng.randrange(len(self.groups))
        if plat == C.ANDROID and int(did[:8], 16) % C.UNGROUPED_ONE_IN == 0:
            g = C.NO_GROUP
        self.group.append(g)
        n_os = len(C.OS_VERSIONS[os_])
        self.osv.append(max(0, n_os - 1 - min(int(rng.expovariate(1.1)), n_os - 1)))
        self.patch.append(
            max(0, len(self.patch_levels) - 1 - int(rng.expovariate(0.6)))
            if plat == C.ANDROID
            else -1
        )
        n_ag = len(C.AGENTS[plat])
        self.agent.append(max(0, n_ag - 1 - int(rng.expovariate(1.3))))
        self.battery.append(rng.randint(5, 100))
        self.is_gms.append(plat == C.ANDROID and rng.random() < 0.85)
        self._assign_blueprint(rng, i, os_)
        self.tags.append(tuple(sorted(rng.sample(C.TAGS, rng.choice((0, 0, 1, 1, 2, 3))))))
        self.created.append(created)
        self.provisioned.append(created + rng.randint(60, 2 * HOUR))
        self.updated.append(self.provisioned[i])
        self.last_seen.append(self.provisioned[i] if seen else -1)
        self.checkin.append(rng.choice((900, 1800, 3600, 4 * HOUR, 8 * HOUR)))
        self.dark.append(not seen)
        self.removed.append(False)
        self.events.append([])
        self.apps.append(self._install_apps(rng, i, plat))
        if not_after is not None:
            self.provisioned[i] = min(self.provisioned[i], not_after)
            self.apps[i] = [
                (a, v, min(c, not_after), min(u, not_after)) for a, v, c, u in self.apps[i]
            ]
            self.updated[i] = self.last_seen[i] = self.provisioned[i]
        if self.apps[i]:
            self.updated[i] = max(self.updated[i], max(a[3] for a in self.apps[i]))
        return i

    def _assign_blueprint(self, rng: random.Random, i: int, os_: int) -> None:
        choices = [b for b, bp in enumerate(self.blueprints) if bp.os == os_]
        b = rng.choice(choices)
        cur = b
        if len(choices) > 1 and rng.random() < 0.03:
            cur = rng.choice([c for c in choices if c != b])
        versions = self.blueprints[cur].versions
        vi = len(versions) - 1
        if rng.random() < 0.15:
            vi = max(0, vi - rng.randint(1, 2))
        self.bp_assigned.append(b)
        self.bp_current.append(cur)
        self.bp_ver.append(self.bp_global[cur][vi])
        if C.OS_PLATFORM[os_] in (C.WINDOWS, C.LINUX):
            status = C.NOT_APPLICABLE
        elif vi == len(versions) - 1:
            status = C.UPGRADED
        else:
            status = C.UPGRADE_FAILED if rng.random() < 0.3 else C.UPGRADABLE
        self.bp_status.append(status)

    def _install_apps(
        self, rng: random.Random, i: int, plat: int
    ) -> list[tuple[int, int, int, int]]:
        t = self.provisioned[i]
        if plat == C.ANDROID:
            picks = list(C.ANDROID_BASE_APPS)
            extra = [k for k in range(len(self.legacy_apps)) if k not in picks]
            picks += sorted(rng.sample(extra, rng.randint(2, 5)))
            catalogue = self.legacy_apps
        elif plat in (C.APPLE, C.WINDOWS):
            pool = [k for k, a in enumerate(self.tenant_apps) if a.platform == plat]
            picks = sorted(rng.sample(pool, rng.randint(1, min(3, len(pool)))))
            catalogue = self.tenant_apps
        else:
            return []
        out = []
        for k in picks:
            nv = len(catalogue[k].versions)
            v = max(0, nv - 1 - int(rng.expovariate(1.2)))
            # an app cannot be on a version published after the device was provisioned
            while v > 0 and catalogue[k].versions[v].created > t + DAY:
                v -= 1
            ts = max(t, catalogue[k].versions[v].created) + rng.randint(60, 6 * HOUR)
            out.append((k, v, t + rng.randint(60, HOUR), ts))
        return out

    # -- generation ----------------------------------------------------------------------

    def generate(self, n_devices: int, t0: int) -> None:
        """Generate ``n_devices`` devices and their catalogues as they stand at ``t0``."""
        self.patch_levels = C.patch_levels(t0)
        rng = random.Random(f"{self.seed}:fleet")
        self._gen_blueprints(rng, t0)
        self._gen_groups(rng, t0, n_devices)
        self._gen_apps(rng, t0)
        for _ in range(n_devices):
            created = t0 - int(rng.uniform(2 * DAY, 730 * DAY))
            i = self.add_device(rng, created, seen=rng.random() > 0.03)
            # a device last changed some time between provisioning and t0, mostly recently
            span = t0 - self.provisioned[i]
            self.updated[i] = t0 - int(span * rng.random() ** 3)
            for k, (a, v, c, u) in enumerate(self.apps[i]):
                if u > self.updated[i]:
                    self.apps[i][k] = (a, v, min(c, self.updated[i]), self.updated[i])
            if self.last_seen[i] >= 0:
                self.last_seen[i] = max(self.updated[i], t0 - int(rng.uniform(0, 2 * HOUR)))
            if rng.random() < 0.05 and self.last_seen[i] >= 0:
                # went dark some days ago and was never seen again
                self.dark[i] = True
                self.last_seen[i] = max(self.updated[i], t0 - int(rng.uniform(DAY, 25 * DAY)))
        self.now = t0

    def _gen_blueprints(self, rng: random.Random, t0: int) -> None:
        for name, os_, n in C.BLUEPRINTS:
            created = t0 - int(rng.uniform(300, 500) * DAY)
            bp = Blueprint(new_id(rng), name, os_, created, created)
            self.blueprints.append(bp)
            self.bp_global.append([])
            t = created
            for _k in range(n):
                t += int(rng.uniform(20, 60) * DAY)
                self.add_blueprint_version(len(self.blueprints) - 1, min(t, t0 - DAY), rng)
            bp.versions[0].created = created

    def add_blueprint_version(self, b: int, ts: int, rng: random.Random) -> int:
        """Publish a new version of blueprint ``b`` at ``ts``; returns its global index."""
        bp = self.blueprints[b]
        n = len(bp.versions) + 1
        bp.versions.append(Version(new_id(rng), n, f"v{n}", str(n), ts, ts))
        bp.updated = ts
        g = len(self.bp_versions)
        self.bp_versions.append((b, n - 1))
        self.bp_global[b].append(g)
        self.version += 1
        return g

    def _gen_groups(self, rng: random.Random, t0: int, n_devices: int) -> None:
        root_created = t0 - 800 * DAY
        self.groups.append(Group(new_id(rng), "All devices", -1, "All devices", root_created, 0))
        regions = ("North", "South", "East", "West")
        n_sites = max(4, min(400, n_devices // 40))
        for r in regions:
            self._add_group(rng, r, 0, root_created + rng.randint(DAY, 30 * DAY))
        for s in range(n_sites):
            parent = 1 + s % len(regions)
            created = self.groups[parent].created + rng.randint(DAY, 60 * DAY)
            self.leaf_groups.append(self._add_group(rng, f"Store {s + 1:03d}", parent, created))

    def _add_group(self, rng: random.Random, name: str, parent: int, created: int) -> int:
        g = len(self.groups)
        path = f"{self.groups[parent].path}/{name}"
        self.groups.append(
            Group(new_id(rng), name, parent, path, created, rng.randrange(len(self.blueprints)))
        )
        self.groups[parent].children.append(g)
        return g

    def _gen_apps(self, rng: random.Random, t0: int) -> None:
        for name, package, category, kind, n in C.ANDROID_APPS:
            app = self._new_app(rng, name, package, C.ANDROID, kind, category, t0)
            for _ in range(n):
                self._add_version(rng, app, app.updated + int(rng.uniform(15, 60) * DAY), t0)
            self.legacy_apps.append(app)
        for name, package, plat, n in C.TENANT_APPS:
            kind = "TENANT_IOS" if plat == C.APPLE else "TENANT_WINDOWS"
            app = self._new_app(rng, name, package, plat, kind, "", t0)
            for _ in range(n):
                self._add_version(rng, app, app.updated + int(rng.uniform(15, 60) * DAY), t0)
            self.tenant_apps.append(app)

    def _new_app(
        self, rng: random.Random, name: str, package: str, plat: int, kind: str, cat: str, t0: int
    ) -> App:
        created = t0 - int(rng.uniform(300, 600) * DAY)
        return App(new_id(rng), name, package, plat, kind, cat, created, created)

    def _add_version(self, rng: random.Random, app: App, ts: int, t0: int) -> None:
        ts = min(ts, t0 - DAY)
        self.add_app_version(app, ts, rng)

    def add_app_version(self, app: App, ts: int, rng: random.Random) -> int:
        """Publish a new version of ``app`` at ``ts``; returns its version index."""
        n = len(app.versions) + 1
        major = 1 + n // 4
        name = f"{major}.{n % 4}.{rng.randint(0, 9)}"
        code = str(major * 10_000 + (n % 4) * 100 + n)
        app.versions.append(Version(new_id(rng), n, name, code, ts, ts))
        app.updated = max(app.updated, ts)
        self.version += 1
        return n - 1


def _initial_state(r: float, plat: int) -> int:
    """A device's state at generation from one uniform draw (DeviceStateEnum of the spec).

    Mostly online (1); 3 % disabled (20); under 1 % each being wiped (70), onboarding (80) or
    failed onboarding (90); about 0.3 % each onboarded (100) and registered (200), the states a
    device passes on its way in; Android devices also still applying their blueprint (150: 0.3 %),
    provisioning (30, 40, 50: 0.3 %) and inactive (60: about 2 %). Apple, Windows and Linux only
    use their subset of the codes.
    """
    if r < 0.03:
        return C.STATE_DISABLED
    if r < 0.036:
        return C.STATE_WIPE
    if r < 0.045:
        return C.STATE_ONBOARDING
    if r < 0.048:
        return C.STATE_ONBOARDING_FAILED
    if r < 0.051:
        return C.STATE_ONBOARDED
    if r < 0.054:
        return C.STATE_REGISTERED
    if plat != C.ANDROID:
        return C.STATE_ACTIVE
    if r < 0.057:
        return C.STATE_APPLYING_BLUEPRINT
    if r < 0.060:
        return C.STATES_PROVISIONING[int((r - 0.057) / 0.001) % 3]
    if r < 0.080:
        return C.STATE_OFFLINE
    return C.STATE_ACTIVE
