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
        history (README, "Data Tap"). `esper-warehouse demo`
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
        """Data Tap queries configured for the next load: config.toml, then the env var."""
        found: dict[str, str] = {}
        config = common.REPO_ROOT / ".dlt" / "config.toml"
        if config.exists():
            with config.open("rb") as f:
                settings = tomllib.load(f)
            found.update(
                settings.get("sources", {}).get("esper", {}).get("data_tap_queries", {}) or {}
            )
        from_env = os.environ.get("SOURCES__ESPER__DATA_TAP_QUERIES")
        if from_env:
            with contextlib.suppress(json.JSONDecodeError):
                found.update(json.loads(from_env))
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
def _(common, configured, mo, pl, tap_tables):
    _loaded = set(tap_tables["query_name"].to_list())
    _names = sorted(set(configured) | _loaded)
    _status = pl.DataFrame(
        {
            "query": _names,
            "configured": [n in configured for n in _names],
            "table": [f"esper.data_tap__{n}" for n in _names],
            "loaded": [n in _loaded for n in _names],
        },
        schema={
            "query": pl.String,
            "configured": pl.Boolean,
            "table": pl.String,
            "loaded": pl.Boolean,
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
    mo.vstack([mo.md("## What is configured and what is loaded"), mo.ui.table(_status), *_notes])
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
    rows = common.query(f"select {_select} from {table.value} limit 1000")
    _total = common.scalar(f"select count(*) from {table.value}")
    mo.vstack(
        [
            mo.md(
                f"{common.code(f'esper.{table.selected_key}')}: **{_total:,} rows**, {columns.height} columns "
                f"(first {rows.height:,} shown)"
            ),
            mo.hstack(
                [
                    mo.ui.table(columns, selection=None, page_size=20),
                    mo.ui.table(rows, page_size=15),
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
    _series = common.query(
        f"select {common.ident(_time)} as t, {_series_sql} as series, "
        f"sum({common.ident(_value)})::double as value from {table.value} group by all order by 1"
    )
    _top = (
        _series.group_by("series")
        .agg(value=_series["value"].sum())
        .sort("value", descending=True)
        .head(8)["series"]
        .to_list()
    )
    tap_chart = (
        alt.Chart(
            _series.filter(_series["series"].is_in(_top) | _series["series"].is_null()),
            title=f"{_value} by {_time}" + (f" and {_by} (top 8)" if _by else ""),
        )
        .mark_line(point=True)
        .encode(
            x=alt.X("t:T", title=_time),
            y=alt.Y("value:Q", title=_value),
            color=alt.Color("series:N", title=_by) if _by else alt.value("#2f6fb0"),
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
        _answer = mo.ui.table(common.query(sql.value), page_size=15)
    except Exception as error:  # a typo in the query is the reader's to fix, not a cell error
        _answer = mo.callout(mo.md(f"The query failed: {common.code(error)}"), kind="danger")
    _answer
    return


if __name__ == "__main__":
    app.run()
