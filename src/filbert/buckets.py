"""Bucket-by-bucket table rewrites with DuckDB (crawldb, linkdb, hostdb).

A rewrite runs one task per host bucket through the executor; each task reads its bucket
of the current generation and writes its bucket of the next one, which is then published
atomically. Each step subclasses BucketTask with the fields its task function needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from filbert.config import Settings
from filbert.executor import make_executor
from filbert.plugins import PluginError
from filbert.storage import VersionedTable, part_name, reading, with_columns, write_table


@dataclass(frozen=True)
class BucketTask:
    """What every bucket task has; a step's subclass adds the fields its task needs.
    Plain data so it can travel to another process."""

    bucket: int
    old: str | None  # this bucket's file in the current generation, if any
    out: str  # file to write


Task = TypeVar("Task", bound=BucketTask)


def latest_per_page(alias: str = "") -> str:
    """The QUALIFY clause keeping each page's row from its latest segment (segment names sort
    by time), in a query over a relation read with `segment=True`; `alias` qualifies the
    columns."""
    col = f"{alias}." if alias else ""
    return f"QUALIFY row_number() OVER (PARTITION BY {col}fp ORDER BY {col}segment DESC) = 1"


_DATABASES: dict[int, duckdb.DuckDBPyConnection] = {}


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh session on this process's in-memory DuckDB (opening a database costs ~15 ms,
    a session almost nothing); keyed by pid so a forked worker opens its own."""
    pid = os.getpid()
    if pid not in _DATABASES:
        _DATABASES[pid] = duckdb.connect()
        _DATABASES[pid].execute("SET threads TO 1")
    con = _DATABASES[pid].cursor()
    con.execute("SET TimeZone = 'UTC'")
    return con


def one_row(result: duckdb.DuckDBPyConnection) -> tuple[Any, ...]:
    """The row of an executed query that returns exactly one (an aggregate, no GROUP BY)."""
    row = result.fetchone()
    assert row is not None, "the query returned no row"
    return row


@dataclass(frozen=True)
class Relation:
    """A table expression for a FROM clause and the values its placeholders bind: paths
    never enter the SQL text, so any character in a crawl directory's path is safe."""

    sql: str
    params: dict[str, object]


def params(*relations: Relation, **values: object) -> dict[str, object]:
    """The named parameters of a query that reads these relations and binds these values."""
    merged: dict[str, object] = {}
    for relation in relations:
        merged.update(relation.params)
    merged.update(values)
    return merged


def parquet_relation(
    name: str, paths: Sequence[str | Path], schema: pa.Schema, segment: bool = False
) -> Relation:
    """Reading some Parquet files, bound as the parameter `$name` (unique within a query),
    or an empty table of the schema when none exist.

    With `segment`, a `segment` column names the segment each row was read from.
    """
    existing = [str(p) for p in paths if Path(p).exists()]
    if existing:
        sql = f"read_parquet(${name}, union_by_name=true, filename={segment})"
        if segment:
            sql = (
                f"(SELECT * EXCLUDE (filename), regexp_extract(filename, '/segments/([^/]+)/', 1)"
                f" AS segment FROM {sql})"
            )
        return Relation(sql, {name: existing})
    cols = [f"NULL::{sql_type(f.type)} AS {f.name}" for f in schema]
    return Relation(
        f"(SELECT {', '.join(cols + (['NULL AS segment'] if segment else []))} WHERE false)", {}
    )


def optional_columns(data: Relation, schema: pa.Schema, names: tuple[str, ...]) -> str:
    """Columns that versions before them did not write, each NULL where the files lack it
    (typed, as `epoch(NULL)` is ambiguous): `a, NULL::T AS b, ...`."""
    described = connect().sql(f"DESCRIBE SELECT * FROM {data.sql}", params=data.params)
    present = {row[0] for row in described.fetchall()}
    return ", ".join(
        name if name in present else f"NULL::{sql_type(schema.field(name).type)} AS {name}"
        for name in names
    )


def sql_type(t: pa.DataType) -> str:
    if pa.types.is_string(t):
        return "VARCHAR"
    if pa.types.is_binary(t):
        return "BLOB"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ"
    if pa.types.is_floating(t):
        return "FLOAT"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_list(t) and pa.types.is_struct(t.value_type):
        fields = ", ".join(f"{f.name} {sql_type(f.type)}" for f in t.value_type)
        return f"STRUCT({fields})[]"
    if pa.types.is_list(t):
        return f"{sql_type(t.value_type)}[]"
    raise TypeError(f"no SQL type for {t}")


def write_result(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    schema: pa.Schema,
    out: str | Path,
    params: dict[str, object] | None = None,
) -> int:
    """Run a query and write its rows, cast to the schema, as one Parquet file."""
    table = con.sql(sql, params=params).to_arrow_table()
    table = with_columns(table, schema).cast(schema, safe=False)  # older files lack some
    write_table(table, Path(out))
    return table.num_rows


def rewrite(
    table: VersionedTable,
    buckets: int,
    settings: Settings,
    run: Callable[[Task], dict[str, int]],
    make_task: Callable[[int, str | None, str], Task],
    meta: dict,
    only_buckets: set[int] | None = None,
) -> dict[str, int]:
    """Produce a table's next generation (crawldb, linkdb, hostdb) bucket by bucket, then
    publish it.

    `make_task(bucket, old, out)` builds each bucket's task, which `run` runs (in a worker
    process, possibly). Buckets outside `only_buckets` are carried over unchanged (hard
    links, no copying).
    Returns the tasks' counters summed. A damaged file of the table is a DamagedFileError.
    """
    files = table.files()
    tmp = table.begin()
    tasks = []
    for bucket in range(buckets):
        path = table.bucket_path(bucket)
        old = str(path) if path is not None and path.exists() else None
        out = tmp / part_name(bucket)
        if only_buckets is not None and bucket not in only_buckets:
            if old is not None:
                os.link(old, out)
            continue
        tasks.append(make_task(bucket, old, str(out)))
    totals: dict[str, int] = {}
    with reading(files):
        for counts in make_executor(settings).map(run, tasks):
            for key, value in counts.items():
                totals[key] = totals.get(key, 0) + value
    table.publish(tmp, {**table.meta(), **meta})
    return totals


def scoring_sql(expressions: Sequence[str], schema: pa.Schema, column: str) -> list[str]:
    """The scoring filters' SQL expressions for `column` (generate's rank, updatedb's
    score) over rows of `schema` and that column, checked on no rows: PluginError naming
    the first that DuckDB cannot run, before any work."""
    columns = ", ".join(
        [f"NULL::{sql_type(f.type)} AS {f.name}" for f in schema if f.name != column]
    )
    for expression in expressions:
        try:
            connect().sql(
                f"SELECT ({expression})::FLOAT FROM (SELECT {columns}, 0::FLOAT AS {column}) "
                "WHERE false"
            ).fetchall()
        except duckdb.Error as exc:
            raise PluginError(
                f"a scoring filter's SQL for the {column}, {expression!r}, does not run: "
                f"{str(exc).splitlines()[0]}"
            ) from None
    return list(expressions)
