"""Manager metrics: approval outcomes, time to decision, queue and runs (selectors).

Everything is computed by the database (aggregates over indexed ranges, or over the rollups
when the window holds more than METRICS_EXACT_MAX_REQUESTS requests); no approval row is ever
loaded into Python. Modules, each importing only those listed before it:

- ``definitions``: constants, result types, who may view metrics, fatigue thresholds, and the
  definitions of requests, outcomes, percentiles, reviewers and fatigue.
- ``portable``: the queries that run on SQLite and Postgres alike.
- ``postgres``: Postgres-only SQL (session tuning, one GROUPING SETS pass).
- ``rollup``: the same rows from the rollups (approvals/rollups.py) for large windows: whole
  UTC days, percentiles within 1%, a few small queries whatever the window.
- ``report``: ``metrics_report()``, what assembles it, and its dict form for the API.
- ``csv_export``: the table as CSV rows.

The names below are re-exported so ``from console.metrics import ...`` keeps working.
"""

from __future__ import annotations

from console.metrics.csv_export import CSV_HEADER, report_csv_rows
from console.metrics.definitions import (
    GROUP_DEFAULT,
    GROUPS,
    MANAGERS_GROUP,
    OUTCOMES,
    PERCENTILES,
    QUEUE_AGE_BUCKETS,
    TIME_BUCKETS,
    UNDECIDED,
    WINDOW_DEFAULT,
    WINDOW_MAX,
    WINDOW_MIN,
    Bucket,
    DayCounts,
    FatigueFlag,
    MetricsReport,
    MetricsRow,
    fatigue_thresholds,
    user_may_view_metrics,
)
from console.metrics.portable import (
    metrics_decisions_per_day,
    metrics_queue_age,
    metrics_runs_by_status,
    metrics_time_to_decision,
)
from console.metrics.postgres import POSTGRES_SETTINGS, postgres_tune
from console.metrics.report import (
    metrics_fatigue,
    metrics_report,
    metrics_rows,
    metrics_total,
    report_as_dict,
    row_as_dict,
)

__all__ = [
    "CSV_HEADER",
    "GROUPS",
    "GROUP_DEFAULT",
    "MANAGERS_GROUP",
    "OUTCOMES",
    "PERCENTILES",
    "POSTGRES_SETTINGS",
    "QUEUE_AGE_BUCKETS",
    "TIME_BUCKETS",
    "UNDECIDED",
    "WINDOW_DEFAULT",
    "WINDOW_MAX",
    "WINDOW_MIN",
    "Bucket",
    "DayCounts",
    "FatigueFlag",
    "MetricsReport",
    "MetricsRow",
    "fatigue_thresholds",
    "metrics_decisions_per_day",
    "metrics_fatigue",
    "metrics_queue_age",
    "metrics_report",
    "metrics_rows",
    "metrics_runs_by_status",
    "metrics_time_to_decision",
    "metrics_total",
    "postgres_tune",
    "report_as_dict",
    "report_csv_rows",
    "row_as_dict",
    "user_may_view_metrics",
]
