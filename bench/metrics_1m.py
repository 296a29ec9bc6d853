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
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_metrics"
APPROVALS_PER_RUN = 4
SPAN_DAYS = 180
REVIEWERS = 20
AGENTS = ("incident_copilot", "refund_agent", "billing_helper", "deploy_bot", "support_triage")
# (tool, tier): eight tools over three tiers.
TOOLS = (
    ("refund_order", "write"),
    ("create_incident_ticket", "write"),
    ("rollback_deploy", "critical"),
    ("notify_customer", "write"),
    ("restock_item", "write"),
    ("delete_account", "critical"),
    ("read_metrics", "read"),
    ("page_oncall", "critical"),
)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=int(os.environ.get("BENCH_METRICS_ROWS", 1_000_000))
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions per grouping")
    parser.add_argument("--fresh", action="store_true", help="regenerate even if the rows exist")
    return parser.parse_args()


def database_prepare(url: str, *, rows: int, fresh: bool) -> bool:
    """Create the scratch database if needed; True when its rows must be generated."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and not fresh:
            try:
                with psycopg.connect(url) as conn:
                    count = conn.execute(
                        "SELECT count(*) FROM approvals_approvalrequest"
                    ).fetchone()
                if count and count[0] == rows:
                    return False
            except psycopg.Error:
                pass  # no tables yet
        if exists:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return True


def _column_defaults(model, explicit: dict[str, str]) -> tuple[list[str], list[str], list]:
    """Columns of ``model``: explicit SQL expressions, every other field at its default."""
    from django.db import connection
    from django.db.models import AutoField

    columns, expressions, params = [], [], []
    for field in model._meta.concrete_fields:
        if isinstance(field, AutoField) and field.column not in explicit:
            continue  # the database numbers it
        columns.append(field.column)
        if field.column in explicit:
            expressions.append(explicit[field.column])
        else:
            expressions.append("%s")
            params.append(field.get_db_prep_save(field.get_default(), connection))
    return columns, expressions, params


def rows_generate(*, rows: int) -> None:
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from approvals.models import AgentRun, ApprovalRequest

    requester = User.objects.create_user("requester", password="bench")
    reviewer_ids = [
        User.objects.create_user(f"reviewer{n:02d}", password="bench").pk
        for n in range(1, REVIEWERS + 1)
    ]
    runs = max(1, rows // APPROVALS_PER_RUN)
    agents_sql = "ARRAY[" + ", ".join(f"'{a}'" for a in AGENTS) + "]"
    run_columns, run_values, run_params = _column_defaults(
        AgentRun,
        {
            "id": "md5('run' || i)::uuid",
            "thread_id": "md5('run' || i)::uuid::text",
            "agent": f"({agents_sql})[1 + i %% {len(AGENTS)}]",  # %% : the SQL has params
            "graph_version": "'1'",
            "status": (
                "CASE WHEN r < 0.80 THEN 'completed' WHEN r < 0.86 THEN 'failed' "
                "WHEN r < 0.89 THEN 'cancelled' WHEN r < 0.91 THEN 'dead' "
                "WHEN r < 0.98 THEN 'waiting' ELSE 'queued' END"
            ),
            "requested_by_id": str(requester.pk),
            "created_at": "created_at",
            "updated_at": "created_at",
        },
    )
    run_sql = (
        f"INSERT INTO {AgentRun._meta.db_table} ({', '.join(run_columns)}) "
        f"SELECT {', '.join(run_values)} FROM ("
        "SELECT i, random() AS r, "
        f"now() - interval '{SPAN_DAYS} days' "
        f"+ (i::float8 / {runs}) * interval '{SPAN_DAYS} days' AS created_at "
        f"FROM generate_series(1, {runs}) AS i) AS src"
    )

    tools_sql = "ARRAY[" + ", ".join(f"'{t}'" for t, _ in TOOLS) + "]"
    tiers_sql = "ARRAY[" + ", ".join(f"'{t}'" for _, t in TOOLS) + "]"
    reviewers_sql = "ARRAY[" + ", ".join(str(pk) for pk in reviewer_ids) + "]"
    approval_columns, approval_values, approval_params = _column_defaults(
        ApprovalRequest,
        {
            "run_id": f"md5('run' || ((i - 1) / {APPROVALS_PER_RUN} + 1))::uuid",
            "interrupt_id": "'i' || i",
            "tool": f"({tools_sql})[tool_no]",
            "tier": f"({tiers_sql})[tool_no]",
            "payload_hash": "repeat('0', 64)",
            "status": "status",
            "decided_by_id": (
                f"CASE WHEN status IN ('pending', 'expired') THEN NULL "
                f"ELSE ({reviewers_sql})[reviewer_no] END"
            ),
            "decided_by_label": (
                "CASE WHEN status = 'pending' THEN '' WHEN status = 'expired' "
                "THEN 'system:timeout' ELSE 'reviewer' || lpad(reviewer_no::text, 2, '0') END"
            ),
            "decided_at": (
                "CASE WHEN status = 'pending' THEN NULL WHEN status = 'expired' "
                "THEN created_at + interval '1 day' "
                "ELSE created_at + make_interval(secs => -ln(1 - r_time) "
                "* CASE WHEN reviewer_no = 1 THEN 3 ELSE 180 END) END"
            ),
            "expires_at": "created_at + interval '1 day'",
            "created_at": "created_at",
            "escalated_at": "CASE WHEN r_flag < 0.05 THEN created_at + interval '1 hour' END",
            "reminded_at": "CASE WHEN r_flag < 0.15 THEN created_at + interval '20 hours' END",
        },
    )
    # Reviewer 01 rubber-stamps: approves everything, in about 3 s (the fatigue signal).
    approval_sql = (
        "WITH src AS MATERIALIZED ("
        "SELECT i, random() AS r_status, random() AS r_time, random() AS r_flag, "
        f"1 + floor(random() * {len(TOOLS)})::int AS tool_no, "
        f"1 + floor(random() * {REVIEWERS})::int AS reviewer_no, "
        f"now() - interval '{SPAN_DAYS} days' + ((i - 1)::float8 / {rows}) "
        f"* interval '{SPAN_DAYS} days' + random() * interval '1 minute' AS created_at "
        f"FROM generate_series(1, {rows}) AS i), "
        "decided AS (SELECT *, CASE "
        "WHEN created_at > now() - interval '1 day' AND r_status < 0.3 THEN 'pending' "
        "WHEN r_status >= 0.92 THEN 'expired' WHEN reviewer_no = 1 THEN 'approved' "
        "WHEN r_status < 0.70 THEN 'approved' WHEN r_status < 0.78 THEN 'edited' "
        "WHEN r_status < 0.88 THEN 'rejected' ELSE 'responded' END AS status FROM src) "
        f"INSERT INTO {ApprovalRequest._meta.db_table} ({', '.join(approval_columns)}) "
        f"SELECT {', '.join(approval_values)} FROM decided ORDER BY i"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.42)")
        started = time.perf_counter()
        cursor.execute(run_sql, run_params)
        print(f"  {runs:,} runs in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        cursor.execute(approval_sql, approval_params)
        print(f"  {rows:,} approvals in {time.perf_counter() - started:.1f} s")


def tables_analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE approvals_agentrun")
        cursor.execute("VACUUM ANALYZE approvals_approvalrequest")


def timed(function, *, repeat: int) -> tuple[float, float]:
    """(median, max) seconds over ``repeat`` calls after one warm-up call."""
    function()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), max(samples)


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
    sys.path.insert(0, str(ROOT))
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
        rows_generate(rows=args.rows)
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
