"""Many tenants: `tenants.toml`, one pipeline and one warehouse file per tenant, the fleet file.

A service provider with several Esper tenants lists them in a `tenants.toml` (template:
`tenants.example.toml`): each tenant's base URL, enterprise id and the NAME of the environment
variable (or dlt secret) that holds its API key; the key itself never sits in the file.

Each tenant gets its own DuckDB file `<warehouse_dir>/<name>.duckdb` and its own dlt pipeline
`esper_warehouse__<name>` (working directory beside the file), so cursors, state, `_esper_runs`
and the models' "now" stay per tenant. `run_all` loads the tenants one after another: a failing
tenant (wrong key, API down) is reported and the next one still loads. `build_fleet` then copies
every tenant's marts into `<warehouse_dir>/fleet.duckdb`, unioned by name with a `tenant`
column, so one query compares tenants.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dlt
import duckdb
from esper_warehouse.sources.esper.http import EsperConfigError
from esper_warehouse.sources.esper.vocabulary import loaded_run_statuses

from ..build.models import RAW_SCHEMA, SCHEMAS
from ..build.raw_contract import PLACEHOLDERS
from ..exit_codes import LOADED, Exit
from ..run.runner import run
from ..run.types import PIPELINE_NAME, RunResult, RunSettings
from ..warehouse import WarehouseLocked, create_if_missing, with_lock_wait

log = logging.getLogger("esper_warehouse")

DEFAULT_FILE = Path("tenants.toml")
TENANTS_FILE_ENV = "ESPER_WAREHOUSE__TENANTS_FILE"
FLEET = "fleet"
NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# A tenant's file `<name>.duckdb` is a DuckDB catalog of that name: one named like a schema of
# the warehouse (the raw dataset, the models' layers) or like DuckDB's own catalogs and schemas
# makes `marts.x` or `esper.x` ambiguous, and its marts would be read wrong or not at all.
DUCKDB_OWN = ("main", "temp", "system", "memory", "information_schema", "pg_catalog")
RESERVED = tuple(sorted({FLEET, RAW_SCHEMA, PLACEHOLDERS, *SCHEMAS, *DUCKDB_OWN}))
REQUIRED = ("base_url", "enterprise_id", "api_key_env")


@dataclass(frozen=True)
class Tenant:
    """One Esper tenant of `tenants.toml` (never its key: only where to find it)."""

    name: str
    base_url: str
    enterprise_id: str
    api_key_env: str
    warehouse: Path
    file: Path = DEFAULT_FILE  # the tenants file that declares it

    @property
    def base_url_name(self) -> str:
        """Where `base_url` came from, named when its host is unknown or its TLS fails."""
        return f"base_url of [tenants.{self.name}] in {self.file}"

    @property
    def pipeline_name(self) -> str:
        return f"{PIPELINE_NAME}__{self.name}"

    def api_key(self) -> str:
        """The key from the environment variable named `api_key_env`, else a dlt secret of it.

        Raises:
            EsperConfigError: neither holds a value (the message names the variable only).
        """
        value = os.environ.get(self.api_key_env)
        if not value:
            value = dlt.secrets.get(self.api_key_env)
        if not value:
            raise EsperConfigError(
                f"tenant {self.name!r}: no API key in the environment variable "
                f"{self.api_key_env} (nor a dlt secret of that name)"
            )
        return str(value)


@dataclass
class Tenants:
    """The tenants of one file, in file order, and where their warehouses live."""

    path: Path
    warehouse_dir: Path
    tenants: dict[str, Tenant] = field(default_factory=dict)

    @property
    def fleet(self) -> Path:
        return self.warehouse_dir / f"{FLEET}.duckdb"

    def pick(self, names: Sequence[str] | None) -> list[Tenant]:
        """The named tenants (all when `names` is empty); an unknown name is a config error."""
        if not names:
            return list(self.tenants.values())
        unknown = [n for n in names if n not in self.tenants]
        if unknown:
            raise EsperConfigError(
                f"unknown tenant(s) {', '.join(unknown)} in {self.path}; "
                f"choose from: {', '.join(self.tenants) or '(none)'}"
            )
        return [self.tenants[n] for n in names]


def tenants_file(path: Path | None = None) -> Path:
    """`path`, else `$ESPER_WAREHOUSE__TENANTS_FILE`, else `tenants.toml` in the current folder."""
    if path is not None:
        return Path(path)
    return Path(os.environ.get(TENANTS_FILE_ENV) or DEFAULT_FILE)


def load_tenants(path: Path | None = None) -> Tenants:
    """Read and check `tenants.toml`.

    Format: an optional top-level `warehouse_dir` (default `warehouses`, relative to the file),
    then one `[tenants.<name>]` table per tenant with `base_url`, `enterprise_id` and
    `api_key_env`. Names are lowercase identifiers (they name files, pipelines and SQL values).

    Raises:
        EsperConfigError: the file is missing or not TOML, a name or field is wrong, or a tenant
            holds a key itself (`api_key`): the error never repeats a value.
    """
    path = tenants_file(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise EsperConfigError(
            f"no tenants file at {path}; copy tenants.example.toml to tenants.toml and edit it "
            f"(or pass --tenants-file, or set {TENANTS_FILE_ENV})"
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise EsperConfigError(f"{path} is not valid TOML: {error}") from None
    unknown = sorted(set(data) - {"warehouse_dir", "tenants"})
    if unknown:
        raise EsperConfigError(f"{path}: unknown top-level key(s) {', '.join(unknown)}")
    warehouse_dir = Path(str(data.get("warehouse_dir", "warehouses"))).expanduser()
    if not warehouse_dir.is_absolute():
        warehouse_dir = path.resolve().parent / warehouse_dir
    entries = data.get("tenants", {})
    if not isinstance(entries, dict) or not entries:
        raise EsperConfigError(f"{path}: no [tenants.<name>] table")
    result = Tenants(path, warehouse_dir)
    for name, entry in entries.items():
        where = f"{path}: tenant {name!r}"
        if not NAME.match(name) or name in RESERVED:
            raise EsperConfigError(
                f"{where}: a name is a lowercase letter then letters, digits or _ "
                f"(at most 40), and not {FLEET!r} nor another name the warehouse uses for its "
                f"own files, catalogs and schemas ({', '.join(RESERVED)})"
            )
        if not isinstance(entry, dict):
            raise EsperConfigError(f"{where}: expected a table of settings")
        if "api_key" in entry:
            raise EsperConfigError(
                f"{where} holds an api_key: keys do not belong in this file; put it in an "
                "environment variable (or a dlt secret) and name that in api_key_env"
            )
        missing = [key for key in REQUIRED if not str(entry.get(key) or "").strip()]
        if missing:
            raise EsperConfigError(f"{where}: missing {', '.join(missing)}")
        extra = sorted(set(entry) - set(REQUIRED))
        if extra:
            raise EsperConfigError(f"{where}: unknown setting(s) {', '.join(extra)}")
        result.tenants[name] = Tenant(
            name=name,
            base_url=str(entry["base_url"]).strip(),
            enterprise_id=str(entry["enterprise_id"]).strip(),
            api_key_env=str(entry["api_key_env"]).strip(),
            warehouse=warehouse_dir / f"{name}.duckdb",
            file=path,
        )
    return result


@contextmanager
def tenant_lock(tenant: Tenant, timeout_s: float) -> Iterator[None]:
    """One run per tenant at a time: an exclusive lock file beside the tenant's warehouse.

    The runner's DuckDB lock guards the file only while it is written; two runs of one tenant
    would still extract into one dlt working directory at once. This lock spans the whole run.

    Raises:
        WarehouseLocked: another run of the tenant held it until the deadline.
    """
    tenant.warehouse.parent.mkdir(parents=True, exist_ok=True)
    lock_path = tenant.warehouse.parent / f".{tenant.warehouse.name}.run.lock"
    with open(lock_path, "a+") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise WarehouseLocked(
                        f"tenant {tenant.name!r}: another run holds {lock_path} "
                        f"(waited {timeout_s:.0f} s); nothing was loaded"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tenant_settings(tenant: Tenant, base: RunSettings) -> RunSettings:
    """`base` (the command line's options) pointed at one tenant: its file, pipeline and key.

    DuckDB: the tenant's own file, dataset unchanged. Other destinations (one database for all):
    a dataset per tenant, `<dataset>_<name>`.
    """
    dataset = base.dataset if base.destination == "duckdb" else f"{base.dataset}_{tenant.name}"
    return RunSettings(
        warehouse=tenant.warehouse,
        destination=base.destination,
        dataset=dataset,
        resources=base.resources,
        full=base.full,
        lock_timeout_s=base.lock_timeout_s,
        load_memory_limit=base.load_memory_limit,
        build_models=base.build_models,
        pipeline_name=tenant.pipeline_name,
        source_options={
            **base.source_options,
            "base_url": tenant.base_url,
            "enterprise_id": tenant.enterprise_id,
        },
    )


def run_tenant(tenant: Tenant, base: RunSettings, **run_options: Any) -> RunResult:
    """One tenant's run under its lock; a missing key or a held lock is a failed result."""
    started = time.monotonic()
    try:
        settings = tenant_settings(tenant, base)
        settings.source_options["api_key"] = tenant.api_key()
        settings.api_key_name = tenant.api_key_env  # named if it is refused
        settings.base_url_name = tenant.base_url_name
        with tenant_lock(tenant, base.lock_timeout_s):
            return run(settings, **run_options)
    except EsperConfigError as error:
        code, text = Exit.CONFIG, f"{type(error).__name__}: {error}"
    except WarehouseLocked as error:
        code, text = Exit.LOCKED, f"{type(error).__name__}: {error}"
    log.error("tenant %s: %s", tenant.name, text)
    # a tenant whose lock another run held did not start (sql/vocabulary/run_statuses.csv)
    result = RunResult("-", code, "locked" if code == Exit.LOCKED else "failed", error=text)
    result.seconds = time.monotonic() - started
    return result


def run_all(
    tenants: Tenants,
    base: RunSettings,
    names: Sequence[str] | None = None,
    *,
    fleet: bool = True,
) -> dict[str, RunResult]:
    """Run the tenants one after another (each failure is kept, the next tenant still runs).

    Then, when `fleet` is true and the destination is DuckDB, rebuild the fleet file.
    """
    results: dict[str, RunResult] = {}
    for tenant in tenants.pick(names):
        log.info("tenant %s: started", tenant.name)
        results[tenant.name] = run_tenant(tenant, base)
        log.info(
            "tenant %s: %s (exit %d)",
            tenant.name,
            results[tenant.name].status,
            results[tenant.name].exit_code,
        )
    if fleet and base.destination == "duckdb":
        try:
            build_fleet(tenants, results, lock_timeout_s=base.lock_timeout_s)
        except Exception as error:
            log.error("fleet: not rebuilt: %s", error)
            results[FLEET] = RunResult(
                "-",
                Exit.LOCKED if isinstance(error, WarehouseLocked) else 1,
                "failed",
                error=f"fleet: {error}",
            )
    return results


def exit_code(results: dict[str, RunResult]) -> int:
    """0 when every tenant succeeded, 6 when every tenant loaded but some partially, else the
    largest exit code among the failed tenants.

    The codes keep the single-tenant meaning (2 config/auth, 3 API, 4 reconciliation, 5 locked,
    6 partial, 1 unexpected); a partial tenant is loaded, not failed, so it never hides a failure.
    The summary names each tenant's own code.
    """
    codes = [r.exit_code for r in results.values()]
    failed = [code for code in codes if code not in LOADED]
    if failed:
        return max(failed)
    return Exit.PARTIAL if Exit.PARTIAL in codes else Exit.OK


def summary(results: dict[str, RunResult]) -> str:
    """One line per tenant: status, exit code, rows loaded, seconds, error."""
    width = max([len(name) for name in results] + [6])
    lines = [f"{'tenant':<{width}}  {'status':<22} exit  {'rows':>10}  {'seconds':>7}  error"]
    for name, result in results.items():
        rows = sum(result.rows.values())
        lines.append(
            f"{name:<{width}}  {result.status:<22} {result.exit_code:>4}  {rows:>10,}  "
            f"{result.seconds:>7.1f}  {_error(result)}".rstrip()
        )
    failed = [name for name, r in results.items() if r.exit_code not in LOADED]
    partial = [name for name, r in results.items() if r.exit_code == Exit.PARTIAL]
    lines.append(
        f"{len(results) - len(failed) - len(partial)} of {len(results)} ok"
        + (f"; partial: {', '.join(partial)}" if partial else "")
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return "\n".join(lines)


def _error(result: RunResult) -> str:
    """A tenant's error column: a partial run names its skipped tables (its run's own summary and
    `status` say why), so its row stays one line."""
    if result.status == "partial" and result.unavailable:
        return f"skipped: {', '.join(sorted(result.unavailable))}"
    return result.error or ""


def _marts(con: Any, alias: str) -> list[str]:
    rows = con.execute(
        "select table_name from information_schema.tables "
        "where table_catalog = ? and table_schema = 'marts' order by table_name",
        [alias],
    ).fetchall()
    return [row[0] for row in rows]


def build_fleet(
    tenants: Tenants,
    results: dict[str, RunResult] | None = None,
    *,
    lock_timeout_s: float = 300.0,
) -> dict[str, int]:
    """Copy every tenant's marts into the fleet file, unioned by name with a `tenant` column.

    Each tenant file is attached read-only for the copy only, so the fleet file never holds a
    tenant's lock afterwards (a view across attached files would: see docs/decisions.md). A
    tenant whose run failed tonight keeps its last built marts; `marts.tenants` says how fresh
    each tenant is (`as_of`, the API time of its latest successful load) and tonight's status.
    Tenants without marts (never loaded) are left out. One transaction: a failure leaves the
    previous fleet file as it was.

    Returns:
        Rows per fleet mart.
    """
    results = results or {}
    tenants.fleet.parent.mkdir(parents=True, exist_ok=True)
    create_if_missing(tenants.fleet)
    con = with_lock_wait(
        lambda: duckdb.connect(str(tenants.fleet)), tenants.fleet, lock_timeout_s, "the fleet"
    )
    try:
        sources, freshness = _attach_tenants(con, tenants, results, lock_timeout_s)
        names = sorted({mart for marts in sources.values() for mart in marts})
        con.execute("begin transaction")
        try:
            counts = _copy_marts(con, sources, names, freshness)
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
        log.info("fleet: %d marts from %d tenant(s) in %s", len(names), len(sources), tenants.fleet)
        return counts
    finally:
        con.close()


def _attach_tenants(
    con: Any, tenants: Tenants, results: dict[str, RunResult], lock_timeout_s: float
) -> tuple[dict[str, list[str]], list[tuple[Any, ...]]]:
    """Attach each tenant file read-only (as `tenant__<name>`).

    Returns:
        The marts of each tenant that has some, and one `marts.tenants` row per tenant file or
        result tonight.
    """
    sources: dict[str, list[str]] = {}
    freshness: list[tuple[Any, ...]] = []
    for tenant in tenants.tenants.values():
        result = results.get(tenant.name)
        if not tenant.warehouse.exists():
            # a failed first run leaves no file (runner.py): tonight's result still names it
            if result is not None:
                row = (str(tenant.warehouse), None, result.status, result.exit_code, False)
                freshness.append((tenant.name, *row))
            continue
        alias = f"tenant__{tenant.name}"
        with_lock_wait(
            lambda t=tenant, a=alias: con.execute(
                f"attach '{t.warehouse.resolve()}' as {a} (read_only)"
            ),
            tenant.warehouse,
            lock_timeout_s,
            "the fleet copy",
        )
        marts = _marts(con, alias)
        if marts:
            sources[tenant.name] = marts
        freshness.append(
            (
                tenant.name,
                str(tenant.warehouse),
                _as_of(con, alias),
                result.status if result else None,
                result.exit_code if result else None,
                bool(marts),
            )
        )
    return sources, freshness


def _as_of(con: Any, alias: str) -> Any:
    """The API time of the attached tenant's latest loaded run, ok or partial (None: no such run)."""
    if not con.execute(
        "select count(*) from information_schema.tables where table_catalog = ? "
        "and table_schema = 'esper' and table_name = '_esper_runs'",
        [alias],
    ).fetchone()[0]:
        return None
    marks = ", ".join("?" for _ in loaded_run_statuses())
    return con.execute(
        f"select max(as_of) from {alias}.esper._esper_runs where status in ({marks})",
        list(loaded_run_statuses()),
    ).fetchone()[0]


def _copy_marts(
    con: Any, sources: dict[str, list[str]], names: list[str], freshness: list[tuple[Any, ...]]
) -> dict[str, int]:
    """Write the fleet's marts (in the caller's transaction); drop those no tenant has any more."""
    counts: dict[str, int] = {}
    con.execute("create schema if not exists marts")
    for name in names:
        parts = [
            f"select '{tenant}' as tenant, * from tenant__{tenant}.marts.{name}"
            for tenant, marts in sources.items()
            if name in marts
        ]
        con.execute(
            f"create or replace table marts.{name} as\n" + "\nunion all by name\n".join(parts)
        )
        counts[name] = con.execute(f"select count(*) from marts.{name}").fetchone()[0]
    for (stale,) in con.execute(
        "select table_name from information_schema.tables where table_catalog = "
        "current_database() and table_schema = 'marts'"
    ).fetchall():
        if stale not in names and stale != "tenants":
            con.execute(f"drop table marts.{stale}")
    con.execute(
        "create or replace table marts.tenants (tenant varchar, warehouse varchar, "
        "as_of timestamptz, last_status varchar, last_exit_code integer, "
        "has_marts boolean)"
    )
    if freshness:
        con.executemany("insert into marts.tenants values (?, ?, ?, ?, ?, ?)", freshness)
    return counts


def main(base: RunSettings, names: Sequence[str] | None, path: Path | None = None) -> int:
    """`esper-warehouse run --tenant NAME ... | --all-tenants`: run, print the summary, exit code.

    `base` carries the command line's options; each tenant replaces the warehouse file, the
    pipeline, the base URL, the enterprise id and the key with its own.
    """
    try:
        tenants = load_tenants(path)
        tenants.pick(names)  # an unknown name fails before anything runs
    except EsperConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return Exit.CONFIG
    results = run_all(tenants, base, names)
    print(summary(results), file=sys.stdout)
    return exit_code(results)
