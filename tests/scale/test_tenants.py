"""Many tenants: one file and pipeline each, a failing tenant reported, the fleet file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from esper_warehouse.pipelines import cli
from esper_warehouse.pipelines.jobs.tenants import load_tenants
from esper_warehouse.sources.esper.http import EsperConfigError

from tests.conftest import API_KEY, storage_version
from tests.scale.conftest import write_tenants


def test_all_tenants_load_the_good_ones_report_the_401_and_fill_the_fleet(
    tenant_sims: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouses = tmp_path / "warehouses"
    path = write_tenants(tmp_path / "tenants.toml", tenant_sims, warehouses)

    # the device list only: what is checked is the tenants' files, pipelines and fleet marts
    code = cli.main(["run", "--all-tenants", "--tenants-file", str(path), "--lock-timeout", "5",
                     "--resources", "devices"])  # fmt: skip

    out = capsys.readouterr()
    assert code == 2  # gamma's key is refused: the auth/config code of a single run
    lines = {line.split()[0]: line for line in out.out.splitlines() if line.strip()}
    assert lines["alpha"].split()[1] == "ok" and lines["beta"].split()[1] == "ok"
    assert lines["gamma"].split()[1] == "failed" and "EsperAuthError" in lines["gamma"]
    # gamma's failed first run loaded nothing: no empty file is left to pass for a warehouse
    assert not (warehouses / "gamma.duckdb").exists()
    assert "2 of 3 ok; failed: gamma" in out.out
    assert API_KEY not in out.out + out.err

    # one file and one pipeline (named after the tenant) per tenant
    devices = {name: len(tenant_sims[name].truth("devices")) for name in ("alpha", "beta")}  # type: ignore[attr-defined]
    assert devices["alpha"] < devices["beta"]
    current: dict[str, int] = {}
    for name in ("alpha", "beta"):
        with duckdb.connect(str(warehouses / f"{name}.duckdb"), read_only=True) as con:
            assert con.sql("select count(*) from esper.devices").fetchone()[0] == devices[name]
            current[name] = con.sql("select count(*) from marts.fleet_compliance").fetchone()[0]
        assert (warehouses / f".{name}.duckdb.dlt" / f"esper_warehouse__{name}").is_dir()
        assert storage_version(warehouses / f"{name}.duckdb") == "v1.5.0+"
    assert storage_version(warehouses / "fleet.duckdb") == "v1.5.0+"

    with duckdb.connect(str(warehouses / "fleet.duckdb"), read_only=True) as con:
        per_tenant = dict(
            con.sql(
                "select tenant, count(*) from marts.fleet_compliance group by tenant"
            ).fetchall()
        )
        assert per_tenant == current  # every good tenant's rows, nothing of gamma
        marts = {
            row[0]
            for row in con.sql(
                "select table_name from information_schema.tables where table_schema = 'marts'"
            ).fetchall()
        }
        assert {"fleet_compliance", "app_rollout_current", "command_rollout", "tenants"} <= marts
        # a daily mart compares tenants in one query
        compared = con.sql(
            "select tenant, sum(devices) from marts.fleet_compliance_daily group by tenant"
        ).fetchall()
        assert {t for t, _ in compared} == {"alpha", "beta"}
        status = {
            t: (s, c, m)
            for t, s, c, m in con.sql(
                "select tenant, last_status, last_exit_code, has_marts from marts.tenants"
            ).fetchall()
        }
        assert status == {
            "alpha": ("ok", 0, True),
            "beta": ("ok", 0, True),
            "gamma": ("failed", 2, False),
        }


def test_one_tenant_runs_alone_and_an_unknown_one_is_refused(
    tenant_sims: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouses = tmp_path / "warehouses"
    path = write_tenants(tmp_path / "tenants.toml", tenant_sims, warehouses)

    assert cli.main(["run", "--tenant", "nobody", "--tenants-file", str(path)]) == 2
    assert "unknown tenant(s) nobody" in capsys.readouterr().err
    assert not warehouses.exists()

    code = cli.main(["run", "--tenant", "alpha", "--tenants-file", str(path), "--no-models",
                     "--resources", "groups"])  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in warehouses.glob("*.duckdb")) == ["alpha.duckdb", "fleet.duckdb"]


def test_missing_key_is_a_config_error_naming_the_variable_only(
    tenant_sims: dict[str, object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_tenants(tmp_path / "tenants.toml", tenant_sims, tmp_path / "w")
    monkeypatch.delenv("ESPER_TEST_KEY_ALPHA")
    assert cli.main(["run", "--tenant", "alpha", "--tenants-file", str(path)]) == 2
    assert "no API key in the environment variable ESPER_TEST_KEY_ALPHA" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[tenants.a]\nbase_url='x'\nenterprise_id='e'\napi_key='secret-123'",
            "keys do not belong",
        ),
        ("[tenants.Bad]\nbase_url='x'\nenterprise_id='e'\napi_key_env='K'", "lowercase letter"),
        ("[tenants.fleet]\nbase_url='x'\nenterprise_id='e'\napi_key_env='K'", "not 'fleet'"),
        # the warehouse's own schemas (pipelines/build/models.py) and DuckDB's: refused when read
        *(
            (f"[tenants.{name}]\nbase_url='x'\nenterprise_id='e'\napi_key_env='K'", "uses for")
            for name in ("esper", "marts", "staging", "intermediate", "seeds", "main", "temp")
        ),
        ("[tenants.a]\nbase_url='x'\napi_key_env='K'", "missing enterprise_id"),
        ("warehouse_dir = 'w'", "no [tenants.<name>] table"),
        ("[tenants.a\n", "not valid TOML"),
    ],
)
def test_a_bad_tenants_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(text)
    with pytest.raises(EsperConfigError) as error:
        load_tenants(path)
    assert message in str(error.value)
    assert "secret-123" not in str(error.value)


def test_the_shipped_example_parses(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    tenants = load_tenants(root / "tenants.example.toml")
    assert tenants.tenants
    for tenant in tenants.tenants.values():
        assert tenant.api_key_env.isupper() and tenant.warehouse.suffix == ".duckdb"


def test_a_refused_tenant_key_names_the_tenants_variable(
    tenant_sims: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_tenants(tmp_path / "tenants.toml", tenant_sims, tmp_path / "warehouses")

    code = cli.main(["run", "--tenant", "gamma", "--tenants-file", str(path), "--no-models"])

    out = capsys.readouterr()
    assert code == 2
    gamma = next(line for line in out.out.splitlines() if line.startswith("gamma"))
    assert "EsperAuthError" in gamma and "ESPER_TEST_KEY_GAMMA" in gamma  # its api_key_env
    assert "SOURCES__ESPER__API_KEY" not in out.out + out.err  # not the single-tenant variable
    assert API_KEY not in out.out + out.err
