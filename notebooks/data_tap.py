import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="Data Tap")


@app.cell
def _():
    import contextlib
    import json
    import os
    import tomllib

    import _common as common
    import altair as alt
    import marimo as mo
    import polars as pl

    return alt, common, contextlib, json, mo, os, pl, tomllib


@app.cell
def _(mo):
    mo.md(
        r"""
        # Data Tap: your own SQL, loaded every night

        Esper's **Data Tap** runs SQL on Esper's side over its daily snapshot tables
        (`devices`, `device_apps`, `groups`, `device_stats`, `users`, each keyed by
        `report_date`). Every query you configure runs on each load and lands in the warehouse
        as the table **`esper.data_tap__<name>`**, with the column types of the query's result.

        ## Add a query

        Data Tap speaks Spark SQL: quote names with backticks, cast the text columns
        (`try_cast(last_seen as timestamp)`, `try_cast(battery_level as int)`) and read the
        JSON-text blobs of `device_stats` with `get_json_object`. Give the query a name
        (letters, digits, `_`) in `.dlt/config.toml`, under `[sources.esper]`:

        ```toml
        [sources.esper.data_tap_queries]
        devices_per_group = '''
        select d.report_date, g.group_name, count(*) as devices
        from devices d
        join groups g on g.group_id = d.group_id and g.report_date = d.report_date
        group by d.report_date, g.group_name
        '''
        ```

        A query with a `cursor` and a `key` is incremental: it reads from the last day loaded on
        (that day again, whole: Data Tap serves its newest day in progress) and keeps the
        history (docs/guide/data-tap.md). `esper-warehouse demo`
        configures one, `device_stats_daily`.

        or, without touching the file (a JSON object of name → SQL):

        ```bash
        export SOURCES__ESPER__DATA_TAP_QUERIES='{"devices_per_group": "select ..."}'
        ```

        then load: `esper-warehouse run` (the nightly job picks it up by itself). The query runs
        on Esper's side, so it can only use Data Tap's tables and SQL; the results are capped per
        query, so aggregate there rather than pulling raw rows.
        """
    )
    return


@app.cell
def _(common):
    wh = common.open_warehouse()
    common.banner(wh)
    return (wh,)


@app.cell
def _(common, contextlib, json, os, tomllib):
    def configured_queries() -> dict[str, str]:
        """Data Tap queries configured for the next load, each with where it is set:
        config.toml, then the env var (which wins, as in dlt)."""
        found: dict[str, str] = {}
        config = common.REPO_ROOT / ".dlt" / "config.toml"
        if config.exists():
            with config.open("rb") as f:
                settings = tomllib.load(f)
            queries = settings.get("sources", {}).get("esper", {}).get("data_tap_queries", {})
            found.update(dict.fromkeys(queries or {}, ".dlt/config.toml"))
        from_env = os.environ.get("SOURCES__ESPER__DATA_TAP_QUERIES")
        if from_env:
            with contextlib.suppress(json.JSONDecodeError):
                found.update(
                    dict.fromkeys(json.loads(from_env), "$SOURCES__ESPER__DATA_TAP_QUERIES")
                )
        return found

    configured = configured_queries()
    return (configured,)


@app.cell
def _(common, mo, wh):
    mo.stop(not wh.ok)
    tap_tables = common.query(
        """
        select
            t.table_name,
            replace(t.table_name, 'data_tap__', '') as query_name,
            -- fully qualified, so it works whatever the warehouse file is called
            '"' || t.database_name || '"."esper"."' || t.table_name || '"' as qualified_name,
            count(c.column_name) as columns
        from duckdb_tables() as t
        left join duckdb_columns() as c
            on c.schema_name = t.schema_name and c.table_name = t.table_name
            and not starts_with(c.column_name, '_dlt')
        where t.schema_name = 'esper' and starts_with(t.table_name, 'data_tap__')
            -- dlt child tables of a query's nested columns are data_tap__<name>__<child>
            and not contains(replace(t.table_name, 'data_tap__', ''), '__')
        group by all
        order by t.table_name
        """
    )
    return (tap_tables,)


@app.cell
def _(common, configured, json, mo, pl, tap_tables):
    # What the last load ran: its settings may come from neither place above (`esper-warehouse
    # demo` passes its query in code), and the run's record names every query it ran or skipped.
    _runs = common.query(
        """
        select '"' || database_name || '"."esper"."_esper_runs"' as name
        from duckdb_tables() where schema_name = 'esper' and table_name = '_esper_runs'
        """
    )
    _last = (
        common.query(
            f"select rows, unavailable from {_runs['name'][0]} order by started_at desc limit 1"
        )
        if _runs.height
        else pl.DataFrame()
    )
    _ran = json.loads(_last["rows"][0] or "{}") if _last.height else {}
    _skipped = json.loads(_last["unavailable"][0] or "{}") if _last.height else {}

    def _query_of(table_name: str) -> str | None:
        """The query a raw table holds (not its nested child tables, `data_tap__<q>__<child>`)."""
        name = table_name.removeprefix("data_tap__")
        return name if name != table_name and "__" not in name else None

    _last_load = {q: f"skipped: {why}" for t, why in _skipped.items() if (q := _query_of(t))}
    _last_load |= {q: f"{n:,} rows" for t, n in _ran.items() if (q := _query_of(t))}
    _loaded = {
        q: common.scalar(f"select count(*) from {name}")
        for q, name in zip(tap_tables["query_name"], tap_tables["qualified_name"], strict=True)
    }
    _names = sorted(set(configured) | set(_loaded) | set(_last_load))
    _status = pl.DataFrame(
        {
            "query": _names,
            "table": [f"esper.data_tap__{n}" for n in _names],
            "last_load": [_last_load.get(n, "not run") for n in _names],
            "rows_kept": [_loaded.get(n) for n in _names],
            "configured_in": [
                configured.get(n) or ("the last load's settings" if n in _last_load else "")
                for n in _names
            ],
        },
        schema={
            "query": pl.String,
            "table": pl.String,
            "last_load": pl.String,
            "rows_kept": pl.Int64,
            "configured_in": pl.String,
        },
    )
    _notes = []
    if not _names:
        _notes.append(
            mo.callout(
                mo.md(
                    "No Data Tap query is configured and none is loaded yet. Add one as shown "
                    "above, run `esper-warehouse run`, then re-run this notebook."
                ),
                kind="info",
            )
        )
    _pending = [n for n in _names if n in configured and n not in _loaded]
    if _pending:
        _notes.append(
            mo.md(
                "Configured but not loaded yet (run `esper-warehouse run`): "
                + ", ".join(common.code(n) for n in _pending)
            )
        )
    mo.vstack(
        [
            mo.md("## What is configured and what is loaded"),
            common.table(_status, "data_tap_queries"),
            *_notes,
        ]
    )
    return


@app.cell
def _(mo, tap_tables):
    mo.stop(tap_tables.height == 0)
    table = mo.ui.dropdown(
        options=dict(zip(tap_tables["table_name"], tap_tables["qualified_name"], strict=True)),
        value=tap_tables["table_name"][0],
        label="Data Tap table",
    )
    mo.vstack([mo.md("## Explore a loaded query"), table])
    return (table,)


@app.cell
def _(common, mo, table):
    columns = common.query(
        """
        select column_name, data_type
        from duckdb_columns()
        where schema_name = 'esper' and table_name = ? and not starts_with(column_name, '_dlt')
        order by column_index
        """,
        [table.selected_key],
    )
    _select = ", ".join(common.ident(c) for c in columns["column_name"].to_list())
    rows = common.query(f"select {_select} from {table.value} limit {common.TABLE_ROWS}")
    _total = common.scalar(f"select count(*) from {table.value}")
    mo.vstack(
        [
            mo.md(
                f"{common.code(f'esper.{table.selected_key}')}: **{_total:,} rows**, {columns.height} columns"
            ),
            mo.hstack(
                [
                    common.table(columns, "data_tap_columns", selection=None, page_size=20),
                    common.table(
                        rows,
                        table.selected_key,
                        total=_total,
                        whole_sql=f"select {_select} from {table.value}",
                        page_size=15,
                    ),
                ],
                widths=[1, 3],
            ),
        ]
    )
    return columns, rows


@app.cell
def _(alt, columns, common, mo, table):
    _types = dict(
        zip(columns["column_name"].to_list(), columns["data_type"].to_list(), strict=True)
    )
    _time = next(
        (c for c, t in _types.items() if t in ("DATE", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP")),
        None,
    )
    _numbers = [
        c
        for c, t in _types.items()
        if t in ("BIGINT", "INTEGER", "DOUBLE", "FLOAT", "HUGEINT", "SMALLINT")
        or t.startswith("DECIMAL")
    ]
    _categories = [c for c, t in _types.items() if t == "VARCHAR"]
    mo.stop(
        _time is None or not _numbers,
        mo.md("_No date and number columns to draw over time: the table above is it._"),
    )
    _value = _numbers[0]
    _by = _categories[0] if _categories else None
    _series_sql = f"{common.ident(_by)}::varchar" if _by else "null::varchar"
    _from = f"{table.value} as t"
    # A device id reads as noise in a legend: the device's name stands for it (the id if the
    # warehouse has no name for it).
    _names = _by in ("device_id", "id") and common.scalar(
        "select count(*) from information_schema.tables where table_schema = 'intermediate' "
        "and table_name = 'int_devices_current'"
    )
    if _names:
        _series_sql = f"coalesce(d.device_name, t.{common.ident(_by)}::varchar)"
        _from += f" left join intermediate.int_devices_current as d on d.device_id = t.{common.ident(_by)}"
        _by = "device"
    _series = common.query(
        f"select t.{common.ident(_time)} as t, {_series_sql} as series, "
        f"sum(t.{common.ident(_value)})::double as value from {_from} group by all order by 1"
    )
    # one line per series, the largest 8 by their total (a colour each): the title says so
    _ranked, _title = common.top(
        _series.filter(_series["series"].is_not_null())
        .group_by("series")
        .agg(value=_series["value"].sum())
        .sort(["value", "series"], descending=[True, False]),
        f"{_value} by {_time}" + (f" and {_by}, largest total first" if _by else ""),
        "every row: the table above",
        n=8,
    )
    _top = _ranked["series"].to_list()
    tap_chart = (
        alt.Chart(
            _series.filter(_series["series"].is_in(_top) | _series["series"].is_null()),
            title=_title,
        )
        .mark_line(point=True)
        .encode(
            x=alt.X("t:T", title=_time),
            y=alt.Y("value:Q", title=_value),
            color=alt.Color("series:N", title=_by, legend=alt.Legend(labelLimit=0, columns=4))
            if _by
            else alt.value("#2f6fb0"),
            tooltip=["t:T", "series:N", "value:Q"],
        )
        .properties(width=560, height=260)
    )
    tap_chart
    return (tap_chart,)


@app.cell
def _(mo, table):
    sql = mo.ui.code_editor(
        value=f"select *\nfrom {table.value}\nlimit 100",
        language="sql",
        label="Your own query (read-only; any table of the warehouse)",
        min_height=120,
    )
    mo.vstack([mo.md("## Ask your own question"), sql])
    return (sql,)


@app.cell
def _(common, mo, sql):
    try:
        _answer = common.table(common.query(sql.value), "your_query", page_size=15)
    except Exception as error:  # a typo in the query is the reader's to fix, not a cell error
        _answer = mo.callout(mo.md(f"The query failed: {common.code(error)}"), kind="danger")
    _answer
    return


if __name__ == "__main__":
    app.run()
