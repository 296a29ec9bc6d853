"""One sweep pass on a generated database (Postgres): recovery of 5k runs, and the approval
steps with 1M pending approvals of which 1k are due.

    .venv/bin/python bench/sweep.py
    .venv/bin/python bench/sweep.py --pending 200000 --recover 2000
    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_sweep .venv/bin/python bench/sweep.py

BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/bench_sweep) names a scratch
database: created when missing, regenerated when it does not hold exactly --pending approvals
(or with --fresh). The rows are made inside Postgres (``INSERT ... SELECT generate_series``):

- ``--runs`` runs (default 250,000), of which ``--recover`` (default 5,000) are running or queued
  with a lease that lapsed an hour ago; the others wait (no lease) or completed;
- ``--pending`` pending approvals (default 1,000,000) on the waiting runs, none due, plus
  ``--due`` (default 1,000) due ones: a third each with a reminder, an escalation, an expiry due.

Figures: one ``agents.tasks.runs_recover`` pass (effects reconciled, runs re-enqueued) and one
``approvals_sweep`` pass, each with its query count, beside the raw indexed
``SELECT ... WHERE due <= now()`` of the same rows. The due rows are reset before each pass, and
the django-q2 queue rows a pass wrote are deleted after it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_sweep"
sys.path.insert(0, str(ROOT))

from bench.datagen import column_defaults, database_prepare  # noqa: E402
from bench.report import figure, section  # noqa: E402


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=250_000)
    parser.add_argument("--recover", type=int, default=5_000, help="runs with a lapsed lease")
    parser.add_argument("--pending", type=int, default=1_000_000, help="approvals, none due")
    parser.add_argument("--due", type=int, default=1_000, help="approvals due, among --pending")
    parser.add_argument("--fresh", action="store_true", help="regenerate even if the rows exist")
    parser.add_argument("--profile", action="store_true", help="cProfile the approvals pass")
    parser.add_argument(
        "--repeat", type=int, default=1, help="approvals passes (due rows reset before each)"
    )
    return parser.parse_args()


def rows_generate(*, runs: int, recover: int, pending: int, due: int) -> None:
    """Runs and pending approvals (see the module docstring), in one transaction."""
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from approvals.models import AgentRun, ApprovalRequest

    requester = User.objects.create_user("requester", password="bench")
    run_columns, run_values, run_params = column_defaults(
        AgentRun,
        {
            "id": "md5('run' || i)::uuid",
            "thread_id": "md5('run' || i)::uuid::text",
            "agent": "'incident_copilot'",
            "graph_version": "'1'",
            # The first runs hold the approvals (waiting); the last --recover ones need recovery.
            "status": (
                f"CASE WHEN i > {runs - recover} THEN "
                "(CASE WHEN i %% 2 = 0 THEN 'running' ELSE 'queued' END) "
                f"WHEN i <= {runs // 2} THEN 'waiting' ELSE 'completed' END"
            ),
            "lease_owner": f"CASE WHEN i > {runs - recover} THEN 'dead-worker' ELSE '' END",
            "lease_expires_at": (
                f"CASE WHEN i > {runs - recover} THEN now() - interval '1 hour' END"
            ),
            "requested_by_id": str(requester.pk),
            "created_at": "now() - interval '1 day'",
            "updated_at": "now() - interval '1 day'",
        },
    )
    run_sql = (
        f"INSERT INTO {AgentRun._meta.db_table} ({', '.join(run_columns)}) "
        f"SELECT {', '.join(run_values)} FROM generate_series(1, {runs}) AS i"
    )
    holders = max(1, runs // 2)
    approval_columns, approval_values, approval_params = column_defaults(
        ApprovalRequest,
        {
            "run_id": f"md5('run' || (1 + i %% {holders}))::uuid",
            "interrupt_id": "'i' || i",
            "tool": "'refund_order'",
            "tier": "'write'",
            "payload_hash": "repeat('0', 64)",
            "status": "'pending'",
            "created_at": "now() - interval '1 hour'",
            "expires_at": "now() + interval '1 day'",
            "remind_at": "now() + interval '20 hours'",
            "escalate_at": "now() + interval '12 hours'",
        },
    )
    approval_sql = (
        f"INSERT INTO {ApprovalRequest._meta.db_table} ({', '.join(approval_columns)}) "
        f"SELECT {', '.join(approval_values)} FROM generate_series(1, {pending}) AS i"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(run_sql, run_params)
        cursor.execute(approval_sql, approval_params)
        print(f"  {runs:,} runs, {pending:,} approvals in {time.perf_counter() - started:.1f} s")
    due_reset(due=due)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE approvals_agentrun")
        cursor.execute("VACUUM ANALYZE approvals_approvalrequest")


def due_reset(*, due: int) -> None:
    """The first ``due`` approvals pending again, a third each with a reminder, an escalation
    and an expiry due; every other pending approval not due at all."""
    from django.db import connection

    third = max(1, due // 3)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE approvals_approvalrequest SET status = 'pending', decided_at = NULL, "
            "decided_by_label = '', decision = '{}'::jsonb, "
            "expires_at = CASE WHEN id %% 3 = 0 THEN now() - interval '1 minute' "
            "ELSE now() + interval '1 day' END, "
            "remind_at = CASE WHEN id %% 3 = 1 THEN now() - interval '1 minute' "
            "ELSE now() + interval '20 hours' END, "
            "escalate_at = CASE WHEN id %% 3 = 2 THEN now() - interval '1 minute' "
            "ELSE now() + interval '12 hours' END "
            "WHERE id <= %s",
            [third * 3],
        )


def queue_clear() -> int:
    from django_q.models import OrmQ

    return OrmQ.objects.all().delete()[0]


def pass_time(function, *, profile: bool = False) -> tuple[float, int, object]:
    """(ms, queries, result) of one call (queries counted by an execute wrapper: Django's
    captured query log keeps only the last 9,000). Prints the time spent in ``execute`` (the
    SQL, round trips and parameter quoting) beside the rest (Python), and with ``profile`` the
    cProfile lines that cost most."""
    import cProfile
    import pstats

    from django.db import connection

    count = 0
    sql = 0.0

    def counter(execute, sql_text, params, many, context):
        nonlocal count, sql
        count += 1
        started = time.perf_counter()
        try:
            return execute(sql_text, params, many, context)
        finally:
            sql += time.perf_counter() - started

    profiler = cProfile.Profile() if profile else None
    with connection.execute_wrapper(counter):
        if profiler:
            profiler.enable()
        started = time.perf_counter()
        result = function()
        elapsed = (time.perf_counter() - started) * 1000
        if profiler:
            profiler.disable()
    print(
        f"  of it in execute (SQL): {sql * 1000:.0f} ms, the rest (Python): "
        f"{elapsed - sql * 1000:.0f} ms" + (" (under cProfile)" if profile else "")
    )
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return elapsed, count, result


def raw_ms(sql: str, repeat: int = 5) -> float:
    """Median ms of one raw query (after one warm-up)."""
    import statistics

    from django.db import connection

    samples = []
    with connection.cursor() as cursor:
        for n in range(repeat + 1):
            started = time.perf_counter()
            cursor.execute(sql)
            cursor.fetchall()
            if n:
                samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> int:
    args = arguments()
    url = os.environ.get("BENCH_DATABASE_URL") or DEFAULT_URL
    if urlsplit(url).scheme not in ("postgres", "postgresql"):
        print(f"sweep: BENCH_DATABASE_URL must be a postgres:// URL, got {url!r}")
        return 2
    try:
        generate = database_prepare(url, rows=args.pending, fresh=args.fresh)
    except Exception as exc:  # psycopg.OperationalError and friends: no server
        print(f"sweep: cannot reach Postgres at {url}: {exc}")
        return 2
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
    os.environ.setdefault("Q_BROKER", "orm")
    import django

    django.setup()
    logging.getLogger("django-q").setLevel(logging.WARNING)  # one line per enqueued task
    from django.conf import settings
    from django.core.management import call_command

    from agents import tasks
    from agents.effects import reconcile
    from agents.runtime import recovery
    from approvals.services import approvals_sweep, policy_seed_demo

    call_command("migrate", verbosity=0)
    if generate:
        print(f"generating {args.runs:,} runs and {args.pending:,} pending approvals ...")
        policy_seed_demo()
        rows_generate(runs=args.runs, recover=args.recover, pending=args.pending, due=args.due)
    queue_clear()

    section(f"recovery: {args.recover:,} runs with a lapsed lease among {args.runs:,}")
    anchor = raw_ms(
        "SELECT id FROM approvals_agentrun WHERE status IN ('running', 'queued') "
        "AND lease_expires_at < now()"
    )
    batch = settings.RECOVERY_BATCH
    passes = [(f"one recovery pass, RECOVERY_BATCH={batch:,}", tasks.runs_recover)]
    if batch < args.recover:  # and all of them in one pass, as the sweep did before

        def everything() -> int:
            reconcile.effects_reconcile()
            return recovery.runs_recover(limit=args.recover)

        passes.append((f"one recovery pass taking all {args.recover:,}", everything))
    for name, function in passes:
        ms, queries, recovered = pass_time(function)
        queued = queue_clear()
        print(f"  re-enqueued {recovered:,} runs ({queued:,} queue rows), {queries} queries")
        figure(
            name, ms, "ms", anchor=("raw indexed SELECT of the due runs", anchor), goal="<= 2000 ms"
        )
        figure("  its queries", queries, "q")

    section(f"approvals: {args.due:,} due among {args.pending:,} pending")
    timings = []
    for _ in range(max(1, args.repeat)):
        due_reset(due=args.due)
        timings.append(pass_time(approvals_sweep, profile=args.profile))
        queue_clear()
    ms, queries, counts = min(timings, key=lambda timing: timing[0])
    anchor = sum(
        raw_ms(
            "SELECT id FROM approvals_approvalrequest WHERE status = 'pending' "
            f"AND {field} <= now() ORDER BY {field}, id"
        )
        for field in ("expires_at", "escalate_at", "remind_at")
    )
    print(f"  {counts}, {queries} queries")
    if len(timings) > 1:
        print("  passes: " + ", ".join(f"{t[0]:.0f} ms" for t in timings) + " (the best below)")
    figure(
        f"one approvals sweep pass, {args.due:,} due",
        ms,
        "ms",
        anchor=("raw indexed SELECTs of the due rows", anchor),
        goal="<= 200 ms",
    )
    figure("  its queries", queries, "q")
    due_reset(due=args.due)
    return 0


if __name__ == "__main__":
    sys.exit(main())
