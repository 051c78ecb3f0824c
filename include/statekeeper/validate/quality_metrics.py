"""The metrics the quality suite's expectations are decided on, computed by Spark in one job.

Great Expectations' Spark engine resolves metrics one expectation at a time: 46-89 Spark jobs and
~10,000 py4j calls for the suite over the sample store, 17-35 s. Here every asset's rows become 0/1
flags, every uniqueness key's duplicated values are counted (grouped by a hash of the key, then by
the exact values of the hashes seen twice), and one query sums both per asset (`compute`). Only an
expectation that finds unexpected rows costs another job: the first `PARTIAL_UNEXPECTED` of them,
for the report.

The values follow GX's Spark metric providers, so that GX's own `_validate` of each expectation
decides and formats exactly what its engine would (tests/validate/test_quality_metrics.py compares
the two on frames with violations):
* a column map metric counts only non-null rows (`column_values.nonnull` counts the nulls);
* `column_values.unique` / `compound_columns.unique`: rows whose key occurs more than once
  (every copy, not copies minus one); a compound key whose columns are all null is ignored;
* `between`: `min_value <= v <= max_value` (strict: `<`), a missing bound is unbounded.

The query is written as SQL expressions, one `selectExpr` per asset: built from Column objects it took
~9,000 py4j round trips (0.5 ms each, most of the suite's time on the sample store) before Spark ran it.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import reduce
from typing import Any

from statekeeper.errors import StatekeeperError

PARTIAL_UNEXPECTED = 20     # GX's SUMMARY `partial_unexpected_count`
ROW_COUNT = "table.row_count"
COLUMNS = "table.columns"


class QualityMetricError(StatekeeperError):
    """The suite declares an expectation (or GX asks for a metric) this module cannot compute."""


class MapMetric(str, Enum):
    """GX's map metric of each expectation type the suite uses."""

    NONNULL = "column_values.nonnull"
    UNIQUE = "column_values.unique"
    BETWEEN = "column_values.between"
    IN_SET = "column_values.in_set"
    COMPOUND_UNIQUE = "compound_columns.unique"


MAP_METRIC = {
    "ExpectColumnValuesToNotBeNull": MapMetric.NONNULL,
    "ExpectColumnValuesToBeUnique": MapMetric.UNIQUE,
    "ExpectColumnValuesToBeBetween": MapMetric.BETWEEN,
    "ExpectColumnValuesToBeInSet": MapMetric.IN_SET,
    "ExpectCompoundColumnsToBeUnique": MapMetric.COMPOUND_UNIQUE,
}
TABLE_EXPECTATIONS = ("ExpectTableColumnsToMatchSet",)


def domain_of(kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The columns an expectation is about: (column,) or its column_list."""
    if "column" in kwargs:
        return (kwargs["column"],)
    if "column_list" in kwargs:
        return tuple(kwargs["column_list"])
    return ()


def condition_args(name: str, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What, besides its domain, tells two metrics of one family apart (two ranges on one column):
    the same from an expectation's kwargs and from GX's metric value kwargs."""
    if name.startswith(MapMetric.BETWEEN.value + "."):
        return tuple(None if kwargs.get(k) is None else float(kwargs[k]) for k in ("min_value", "max_value")) + (
            bool(kwargs.get("strict_min")), bool(kwargs.get("strict_max")))
    if name.startswith(MapMetric.IN_SET.value + "."):
        return tuple(sorted(map(repr, kwargs["value_set"])))
    return ()


def metric_key(name: str, domain: tuple[str, ...] = (), kwargs: dict[str, Any] | None = None) -> str:
    if not domain:
        return name
    args = condition_args(name, kwargs or {})
    return f"{name}|{','.join(domain)}" + (f"|{args!r}" if args else "")


@dataclass(frozen=True)
class AssetMetrics:
    """One asset's metric values by `metric_key`: counts, its columns, and unexpected samples."""

    asset: str
    values: dict[str, Any]

    def get(self, name: str, domain: tuple[str, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        key = metric_key(name, domain, kwargs)
        if key not in self.values:
            raise QualityMetricError(f"quality suite: no metric {key!r} was computed for asset {self.asset!r}")
        return self.values[key]


def _name(column: str) -> str:
    """A column as a SQL identifier."""
    return "`" + column.replace("`", "``") + "`"


def _literal(value: Any) -> str:
    """A value of an expectation's kwargs as a SQL literal (the value sets and bounds the suite declares)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"CAST({value} AS BIGINT)"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise QualityMetricError(f"quality suite: cannot compare with {value!r} ({type(value).__name__}) in Spark")


def _condition(kind: str, kwargs: dict[str, Any]) -> str:
    """The unexpected-row condition (SQL) of one map expectation that is not about a key's uniqueness."""
    metric, domain = MAP_METRIC[kind], domain_of(kwargs)
    col = _name(domain[0])
    if metric is MapMetric.NONNULL:
        return f"{col} IS NULL"
    if metric is MapMetric.IN_SET:
        values = ", ".join(_literal(v) for v in kwargs["value_set"])
        return f"({col} IS NOT NULL AND NOT ({col} IN ({values})))" if values else f"({col} IS NOT NULL)"
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    inside = ["true"]
    if low is not None:
        inside.append(f"{col} {'>' if kwargs.get('strict_min') else '>='} {_literal(low)}")
    if high is not None:
        inside.append(f"{col} {'<' if kwargs.get('strict_max') else '<='} {_literal(high)}")
    return f"({col} IS NOT NULL AND NOT ({' AND '.join(inside)}))"


def _present(domain: tuple[str, ...]) -> str:
    """GX's domain of a key (SQL): a column's non-null rows; a compound key's rows not all null."""
    return "(" + " OR ".join(f"{_name(c)} IS NOT NULL" for c in domain) + ")"


@dataclass
class _Plan:
    """One asset's counted conditions and uniqueness keys (metric keys in a fixed order)."""

    asset: str
    df: Any
    columns: tuple[str, ...]
    counts: dict[str, str]                       # metric key -> condition (SQL) whose true rows it counts
    keys: dict[str, tuple[str, ...]]             # unique unexpected_count key -> key columns
    # unexpected_values key -> (count key, domain, (kind, kwargs))
    samples: dict[str, tuple[str, tuple[str, ...], Any]]


def _plan(asset: str, df: Any, expectations: list[tuple[str, dict[str, Any]]]) -> _Plan:
    counts: dict[str, str] = {ROW_COUNT: "true"}
    keys: dict[str, tuple[str, ...]] = {}
    samples: dict[str, tuple[str, tuple[str, ...], Any]] = {}
    for kind, kwargs in expectations:
        if kind in TABLE_EXPECTATIONS:
            continue
        if kind not in MAP_METRIC:
            raise QualityMetricError(f"quality suite: no Spark metrics for {kind} (asset {asset!r}); "
                                     f"add it to statekeeper.validate.quality_metrics")
        metric, domain = MAP_METRIC[kind], domain_of(kwargs)
        if metric is not MapMetric.COMPOUND_UNIQUE:
            counts[metric_key(f"{MapMetric.NONNULL.value}.unexpected_count", domain)] = f"{_name(domain[0])} IS NULL"
        count_key = metric_key(f"{metric.value}.unexpected_count", domain, kwargs)
        if metric in (MapMetric.UNIQUE, MapMetric.COMPOUND_UNIQUE):
            keys[count_key] = domain
            if metric is MapMetric.COMPOUND_UNIQUE:
                counts[metric_key(f"{metric.value}.filtered_row_count", domain)] = _present(domain)
        else:
            counts[count_key] = _condition(kind, kwargs)
        samples[metric_key(f"{metric.value}.unexpected_values", domain, kwargs)] = (count_key, domain, (kind, kwargs))
    return _Plan(asset, df, tuple(df.columns), counts, keys, samples)


def compute(assets: list[tuple[str, Any, list[tuple[str, dict[str, Any]]]]]) -> dict[str, AssetMetrics]:
    """Every asset's metrics: one Spark query for all the counts, one more per expectation that failed.

    `assets` are (name, DataFrame, [(GX expectation type, kwargs)]). The query is a union of every
    asset's rows as 0/1 flags (padded to one width) and every key's duplicated-row counts, summed per
    asset: three shuffle stages whatever the number of assets (a window or an aggregate per asset
    cost a Spark job each, 22 for the suite).
    """
    from pyspark.sql import functions as F

    plans = [_plan(name, df, expectations) for name, df, expectations in assets]
    width = max(len(p.counts) for p in plans)

    def flags(p: _Plan) -> Any:
        cells = [f"CAST(CASE WHEN {c} THEN 1 ELSE 0 END AS BIGINT)" for c in p.counts.values()]
        cells += ["CAST(0 AS BIGINT)"] * (width - len(cells))
        return p.df.selectExpr(f"{_literal(p.asset)} AS asset", "CAST(NULL AS STRING) AS metric",
                               *[f"{c} AS m{i}" for i, c in enumerate(cells)])

    keyed = [(p, key, domain) for p in plans for key, domain in p.keys.items()]
    parts = [flags(p) for p in plans]
    if keyed:
        parts.append(_duplicates(keyed, width))
    sums = (reduce(lambda a, b: a.unionByName(b), parts).groupBy("asset", "metric")
            .agg(*[F.expr(f"sum(m{i}) AS m{i}") for i in range(width)]).collect())
    totals: dict[str, dict[str, int]] = {p.asset: {} for p in plans}
    by_asset = {p.asset: p for p in plans}
    for row in sums:
        p = by_asset[row["asset"]]
        if row["metric"] is None:
            totals[p.asset].update({k: int(row[f"m{i}"]) for i, k in enumerate(p.counts)})
        else:
            totals[p.asset][row["metric"]] = int(row["m0"])
    result = {}
    for p in plans:
        values: dict[str, Any] = {COLUMNS: list(p.columns), **{k: 0 for k in p.counts}, **{k: 0 for k in p.keys},
                                  **totals[p.asset]}
        for key, (count_key, domain, (kind, kwargs)) in p.samples.items():
            values[key] = _sample(p, count_key, domain, kind, kwargs) if values[count_key] else []
        result[p.asset] = AssetMetrics(p.asset, values)
    return result


def _duplicates(keyed: list[tuple[_Plan, str, tuple[str, ...]]], width: int) -> Any:
    """Per key, its duplicated values' rows (asset, metric, m0 = rows of a value seen more than once, m1.. = 0),
    as GX counts them: every row of a value that occurs more than once.

    Grouping the keys themselves shuffled every key value whole (URIs, and the references' compound key as
    JSON: at 1M objects ~15 s of task time beside validation's own work). So the grouping is of a 64-bit hash
    of each key, and only the rows of a hash seen more than once (none in a sound table) are grouped again
    by their exact value, after a broadcast semi join that keeps the rest of the rows out of any shuffle. A
    hash two distinct values share is told apart there, so the counts are exact."""
    from pyspark.sql import functions as F

    def hashed(i: int, p: _Plan, domain: tuple[str, ...], *extra: str) -> Any:
        return p.df.where(_present(domain)).selectExpr(f"{i} AS key_no", f"xxhash64({', '.join(map(_name, domain))})"
                                                      " AS h", *extra)

    seen_twice = (reduce(lambda a, b: a.unionByName(b), [hashed(i, p, d) for i, (p, _, d) in enumerate(keyed)])
                  .groupBy("key_no", "h").count().where("count > 1").select("key_no", "h"))
    exact = []
    for i, (p, key, domain) in enumerate(keyed):
        fields = ", ".join(f"{_literal(c)}, {_name(c)}" for c in domain)
        candidates = (hashed(i, p, domain, *map(_name, domain))
                      .join(F.broadcast(seen_twice), ["key_no", "h"], "left_semi"))
        exact.append(candidates.selectExpr(f"{_literal(p.asset)} AS asset", f"{_literal(key)} AS metric",
                                           f"to_json(named_struct({fields})) AS k"))
    return (reduce(lambda a, b: a.unionByName(b), exact).groupBy("asset", "metric", "k")
            .agg(F.count(F.lit(1)).alias("n")).where("n > 1")
            .selectExpr("asset", "metric", "n AS m0", *[f"CAST(0 AS BIGINT) AS m{i}" for i in range(1, width)]))


def _sample(p: _Plan, count_key: str, domain: tuple[str, ...], kind: str, kwargs: dict[str, Any]) -> list[Any]:
    """The first unexpected values (GX's partial list): a column's values, or a compound key's dicts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if count_key in p.keys:
        seen = F.count(F.lit(1)).over(Window.partitionBy(*[F.col(c) for c in domain]))
        rows = (p.df.where(_present(domain)).select(*domain, seen.alias("__sk_seen")).where(F.col("__sk_seen") > 1)
                .select(*domain).limit(PARTIAL_UNEXPECTED).collect())
    else:
        rows = p.df.where(_condition(kind, kwargs)).select(*domain).limit(PARTIAL_UNEXPECTED).collect()
    if len(domain) == 1:
        return [r[0] for r in rows]
    return [r.asDict() for r in rows]
