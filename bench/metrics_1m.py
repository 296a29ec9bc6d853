"""The manager metrics (console/metrics/) on a generated table of 1M approvals (Postgres).

Generates the rows inside Postgres (``INSERT ... SELECT generate_series``, seeded random) in a
scratch database, then times ``metrics_report()`` for each grouping (median of several
repetitions after one warm-up), and prints the EXPLAIN ANALYZE of the slowest query.

    .venv/bin/python bench/metrics_1m.py                 # 1M approvals, 250k runs
    .venv/bin/python bench/metrics_1m.py --rows 200000 --repeat 3
    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_metrics .venv/bin/python bench/metrics_1m.py

BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/bench_metrics) names a scratch
database: it is created when missing, and dropped and created again whenever it does not hold
exactly --rows approvals (or with --fresh). A second run reuses the data. Postgres only: the
benchmark is about the production database.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
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


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=int(os.environ.get("BENCH_METRICS_ROWS", 1_000_000))
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions per grouping")
    parser.add_argument("--fresh", action="store_true", help="regenerate even if the rows exist")
    return parser.parse_args()


def slowest_query_explain(function) -> tuple[float, str]:
    """Run ``function`` capturing its SQL; EXPLAIN ANALYZE each and return the slowest plan."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        function()
    from django.db import transaction

    from console.metrics.postgres import postgres_tune

    worst: tuple[float, str] = (-1.0, "")
    with transaction.atomic(), connection.cursor() as cursor:
        postgres_tune()  # the same session settings as metrics_report()
        for query in captured.captured_queries:
            if not query["sql"].lstrip().upper().startswith("SELECT"):  # SET, BEGIN, ...
                continue
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + query["sql"])
            plan = "\n".join(row[0] for row in cursor.fetchall())
            execution = float(plan.rsplit("Execution Time: ", 1)[1].split(" ", 1)[0])
            if execution > worst[0]:
                worst = (execution, query["sql"] + "\n\n" + plan)
    return worst


def main() -> int:
    args = arguments()
    url = os.environ.get("BENCH_DATABASE_URL") or DEFAULT_URL
    if urlsplit(url).scheme not in ("postgres", "postgresql"):
        print(f"metrics_1m: BENCH_DATABASE_URL must be a postgres:// URL, got {url!r}")
        return 2
    try:
        generate = database_prepare(url, rows=args.rows, fresh=args.fresh)
    except Exception as exc:  # psycopg.OperationalError and friends: no server
        print(f"metrics_1m: cannot reach Postgres at {url}: {exc}")
        return 2
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from approvals.models import AgentRun, ApprovalRequest
    from console.metrics.definitions import GROUPS
    from console.metrics.report import metrics_report

    server = connection.cursor().connection.info.server_version
    print(f"database: {urlsplit(url).path.lstrip('/')} (PostgreSQL {server // 10000})")
    call_command("migrate", verbosity=0)  # also brings a reused database up to date
    if generate:
        print(f"generating {args.rows:,} approvals over {SPAN_DAYS} days ...")
        started = time.perf_counter()
        approvals_generate(rows=args.rows)
        tables_analyze()
        print(f"  generated and analyzed in {time.perf_counter() - started:.1f} s")
    else:
        print("reusing the generated rows (--fresh regenerates them)")
    latest = ApprovalRequest.objects.order_by("-created_at").values_list("created_at", flat=True)[0]
    now = max(latest, timezone.now())
    in_window = ApprovalRequest.objects.filter(created_at__gte=now - dt.timedelta(days=30)).count()
    print(
        f"approvals: {ApprovalRequest.objects.count():,}, runs: {AgentRun.objects.count():,}, "
        f"pending: {ApprovalRequest.objects.filter(status='pending').count():,}, "
        f"in the 30-day window: {in_window:,}"
    )
    print(f"\nmetrics_report() per call, median of {args.repeat} (max):")
    cases = [(30, group) for group in GROUPS] + [(365, "tier"), (365, "agent")]
    for window, group in cases:
        median, worst = timed(
            lambda w=window, g=group: metrics_report(window_days=w, group=g, now=now),
            repeat=args.repeat,
        )
        print(
            f"  window={window:>3} group={group:<9} {median * 1000:7.0f} ms  ({worst * 1000:.0f})"
        )
    report = metrics_report(window_days=30, group="reviewer", now=now)
    print(f"\nfatigue flags (30 days): {[(f.dimension, f.key) for f in report.fatigue]}")
    execution, plan = slowest_query_explain(
        lambda: metrics_report(window_days=30, group="agent", now=now)
    )
    print(f"\nslowest query of window=30 group=agent ({execution:.0f} ms):\n{plan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
