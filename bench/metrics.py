"""The manager metrics (console/metrics/) from the rollups, at 1M (or --rows) approvals.

Generates the rows inside Postgres (``bench/datagen.approvals_generate``: ``INSERT ... SELECT
generate_series``, seeded random) in a scratch database, builds the rollups with the backfill
(timed, when the rollup tables are empty or with --backfill), then times ``metrics_report()``
from the rollups for every grouping and the windows 7/30/90/365, beside the old direct query
(``source="rows"``) at 30 days measured in the same run, with the queries each report makes.

    .venv/bin/python bench/metrics.py                      # 1M approvals, 250k runs
    .venv/bin/python bench/metrics.py --rows 10000000      # 10M (generating takes minutes)
    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_metrics .venv/bin/python bench/metrics.py

BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/bench_metrics) names a scratch
database: it is created when missing, and dropped and created again whenever it does not hold
exactly --rows approvals (or with --fresh). A second run reuses the data and the rollups.
Postgres only: the benchmark is about the production database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_metrics"
sys.path.insert(0, str(ROOT))

from bench.datagen import (  # noqa: E402 - after the path that finds it
    SPAN_DAYS,
    approvals_generate,
    database_prepare,
    tables_analyze,
    timed,
)
from bench.report import figure, section  # noqa: E402

WINDOWS = (7, 30, 90, 365)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=int(os.environ.get("BENCH_METRICS_ROWS", 1_000_000))
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per case")
    parser.add_argument("--fresh", action="store_true", help="regenerate even if the rows exist")
    parser.add_argument("--backfill", action="store_true", help="rebuild the rollups again")
    return parser.parse_args()


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def main() -> int:
    args = arguments()
    url = os.environ.get("BENCH_DATABASE_URL") or DEFAULT_URL
    if urlsplit(url).scheme not in ("postgres", "postgresql"):
        print(f"metrics: BENCH_DATABASE_URL must be a postgres:// URL, got {url!r}")
        return 2
    try:
        generate = database_prepare(url, rows=args.rows, fresh=args.fresh)
    except Exception as exc:  # psycopg.OperationalError and friends: no server
        print(f"metrics: cannot reach Postgres at {url}: {exc}")
        return 2
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from approvals.advice_selectors import autonomy_advice_report
    from approvals.models import ApprovalRequest
    from approvals.rollup_models import MetricsBucket, MetricsCount, MetricsHistogram
    from approvals.rollup_rebuild import rollups_rebuild
    from approvals.rollup_runs import runs_by_status_days
    from console.metrics.definitions import GROUPS
    from console.metrics.portable import metrics_runs_by_status
    from console.metrics.report import metrics_report
    from console.metrics.rollup import _blocks, _percentiles, day_range, day_start

    server = connection.cursor().connection.info.server_version
    print(f"database: {urlsplit(url).path.lstrip('/')} (PostgreSQL {server // 10000})")
    call_command("migrate", verbosity=0)  # also brings a reused database up to date
    if generate:
        print(f"generating {args.rows:,} approvals over {SPAN_DAYS} days ...")
        started = time.perf_counter()
        approvals_generate(rows=args.rows)
        tables_analyze()
        print(f"  generated and analyzed in {time.perf_counter() - started:.1f} s")
    rows = ApprovalRequest.objects.count()
    label = f"{rows / 1e6:g}M approvals"
    section(f"metrics from the rollups, {label} (median of {args.repeat} after a warm-up)")
    if args.backfill or generate or not MetricsCount.objects.exists():
        started = time.perf_counter()
        rollups_rebuild(batch=200_000, progress=lambda line: print(line, flush=True))
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE approvals_metricscount")
            cursor.execute("VACUUM ANALYZE approvals_metricshistogram")
        figure(f"backfill (metrics_backfill), {label}", time.perf_counter() - started, "s")
    print(
        f"  rollup rows: {MetricsCount.objects.count():,} counters, "
        f"{MetricsHistogram.objects.count():,} histograms holding "
        f"{MetricsBucket.objects.count():,} buckets"
    )
    latest = ApprovalRequest.objects.order_by("-created_at").values_list("created_at", flat=True)[0]
    now = max(latest, timezone.now())

    old_median, _ = timed(
        lambda: metrics_report(window_days=30, group="agent", now=now, source="rows"),
        repeat=max(1, min(3, args.repeat)),
    )
    anchor = ("old query, 30 d", old_median * 1000)
    figure(f"old direct query, 30 days, group=agent, {label}", old_median * 1000, "ms")
    worst: list[float] = []
    for window in WINDOWS:
        for group in GROUPS:

            def report(w: int = window, g: str = group) -> None:
                metrics_report(window_days=w, group=g, now=now, source="rollups")

            report()  # warm-up
            samples = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                report()
                samples.append((time.perf_counter() - started) * 1000)
            worst.append(p95(samples))
            with CaptureQueriesContext(connection) as captured:
                report()
            name = f"rollups {window:>3} d group={group:<8}"
            figure(f"{name} median", statistics.median(samples), "ms", anchor=anchor)
            figure(
                f"{name} p95 ({len(captured)} queries)",
                p95(samples),
                "ms",
                anchor=anchor,
                goal="<= 50 ms",
            )
    figure(f"worst p95 over every window and grouping, {label}", max(worst), "ms", anchor=anchor)
    # Where a report's time goes: the percentiles (one histogram row per block and key, summed
    # in Python) and runs by status (now kept by triggers: approvals/rollup_runs.py), beside
    # the live count over approvals_agentrun it replaced.
    for window in WINDOWS:
        first, last = day_range(window_days=window, now=now)
        blocks = _blocks(first, last)
        percentiles, _ = timed(
            lambda b=blocks: _percentiles(b, ["agent", "reviewer", "tier", "tool"]),
            repeat=args.repeat,
        )
        runs, _ = timed(
            lambda f=first: metrics_runs_by_status(since=day_start(f), now=now),
            repeat=args.repeat,
        )
        kept, _ = timed(
            lambda f=first, la=last: runs_by_status_days(first=f, last=la), repeat=args.repeat
        )
        figure(f"  of which percentiles, {window:>3} d", percentiles * 1000, "ms", anchor=anchor)
        figure(
            f"  runs by status, trigger-kept (what the report reads), {window:>3} d",
            kept * 1000,
            "ms",
            anchor=("the live count it replaced", runs * 1000),
        )
    report = metrics_report(window_days=30, group="reviewer", now=now, source="rollups")
    print(f"  fatigue flags (30 days): {[(f.dimension, f.key) for f in report.fatigue]}")
    # The autonomy advice (/autonomy/, docs/autonomy.md) reads its counts and medians from the
    # same rollups, by tool and by tier; reasons, undo shares and shadow agreement directly.
    for window in WINDOWS:
        advice, _ = timed(
            lambda d=window: autonomy_advice_report(days=d, now=now), repeat=args.repeat
        )
        with CaptureQueriesContext(connection) as captured:
            classes = len(autonomy_advice_report(days=window, now=now).tools)
        figure(
            f"autonomy advice, {window:>3} d ({len(captured)} queries, {classes} tools)",
            advice * 1000,
            "ms",
            anchor=anchor,
            goal="<= 50 ms",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
