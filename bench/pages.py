"""The console pages on a generated database: queue, approval detail, runs, audit log (first
page, a deep page, filtered pages), through Django's test Client, beside the Django admin
changelist of the same approvals table (Postgres).

    .venv/bin/python bench/pages.py                                   # 1M approvals, 2M events
    .venv/bin/python bench/pages.py --rows 10000000 --audit-rows 20000000 \\
        # with BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_pages_10m

BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/bench_pages) is created when
missing and regenerated when it does not hold exactly --rows approvals (or with --fresh);
audit events are added until it holds --audit-rows. Prints median and p95 per page, the
queries per page, and the EXPLAIN ANALYZE of the slowest page's slowest query.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_pages"
sys.path.insert(0, str(ROOT))

from bench.datagen import (  # noqa: E402
    approvals_generate,
    audit_generate,
    database_prepare,
    tables_analyze,
)
from bench.report import figure, section  # noqa: E402


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=int(os.environ.get("BENCH_PAGES_ROWS", 1_000_000))
    )
    parser.add_argument(
        "--audit-rows", type=int, default=int(os.environ.get("BENCH_PAGES_AUDIT_ROWS", 2_000_000))
    )
    parser.add_argument("--repeat", type=int, default=15, help="timed requests per page")
    parser.add_argument("--fresh", action="store_true")
    return parser.parse_args()  # fmt: skip


def people():
    from django.contrib.auth.models import Permission, User

    from audit.services import compliance_group_ensure

    reviewer, created = User.objects.get_or_create(username="bench-bob")
    if created:
        reviewer.user_permissions.add(Permission.objects.get(codename="decide"))
    compliance, created = User.objects.get_or_create(username="bench-frank")
    if created:
        compliance.groups.add(compliance_group_ensure())
    admin, _ = User.objects.get_or_create(
        username="bench-admin", defaults={"is_superuser": True, "is_staff": True}
    )
    return reviewer, compliance, admin


def timed_page(client, url: str, repeat: int) -> tuple[float, float, int]:
    """(median ms, p95 ms, queries) for GET url after one warm-up request."""

    queries = page_queries(client, url)
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return statistics.median(samples), p95, len(queries)


def page_queries(client, url: str) -> list[dict]:
    """The queries of one request (request_started empties the log: read it after)."""
    from django.db import connection

    connection.force_debug_cursor = True
    try:
        response = client.get(url)
        queries = list(connection.queries)
    finally:
        connection.force_debug_cursor = False
    assert response.status_code == 200, (url, response.status_code)
    return queries


def slowest_query(client, url: str) -> tuple[float, str]:
    from django.db import connection

    worst: tuple[float, str] = (-1.0, "")
    with connection.cursor() as cursor:
        for query in page_queries(client, url):
            sql = query["sql"]
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            ms = float(plan.rsplit("Execution Time: ", 1)[1].split(" ", 1)[0])
            if ms > worst[0]:
                worst = (ms, sql + "\n" + plan)
    return worst


def main() -> int:
    args = arguments()
    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    generate = database_prepare(url, rows=args.rows, fresh=args.fresh)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from approvals.models import ApprovalRequest
    from audit.models import AuditEvent

    setup_test_environment()  # the test Client's host, and the template context
    if generate:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        approvals_generate(rows=args.rows)
        print(f"generated {args.rows:,} approvals in {time.perf_counter() - started:.1f} s")
    missing = args.audit_rows - AuditEvent.objects.count()
    if missing > 0:
        started = time.perf_counter()
        audit_generate(rows=missing)
        print(f"generated {missing:,} audit events in {time.perf_counter() - started:.1f} s")
    if generate or missing > 0:
        tables_analyze()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE audit_auditevent")
    reviewer, compliance, admin = people()
    head = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 1
    pending = (
        ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING)
        .order_by("-id")
        .values_list("pk", flat=True)
        .first()
    )
    sizes = f"{args.rows / 1e6:g}M approvals, {args.audit_rows / 1e6:g}M audit rows"
    section(f"Pages at {sizes} (Postgres), median of {args.repeat} (p95)")

    clients = {}
    for user in (reviewer, compliance, admin):
        clients[user.username] = Client()
        clients[user.username].force_login(user)
    admin_ms, _, _ = timed_page(clients["bench-admin"], "/admin/approvals/approvalrequest/", 3)
    anchor = ("admin changelist", admin_ms)
    pages = [
        ("queue (reviewer, all pending)", "bench-bob", "/?scope=all"),
        ("queue (reviewer, mine)", "bench-bob", "/"),
        ("approval detail", "bench-bob", f"/approvals/{pending}/"),
        ("runs list", "bench-bob", "/runs/"),
        ("runs list, status=waiting", "bench-bob", "/runs/?status=waiting"),
        ("audit log, first page", "bench-frank", "/audit/"),
        ("audit log, deep page", "bench-frank", f"/audit/?before={head // 2}"),
        ("audit log, action filter", "bench-frank", "/audit/?action=approval.decided"),
        ("audit log, actor filter", "bench-frank", "/audit/?actor=reviewer07"),
        ("audit log, tool + day", "bench-frank", "/audit/?tool=refund_order&date_from=2026-09-01&date_to=2026-09-01"),
    ]  # fmt: skip
    worst: tuple[float, str, str] = (-1.0, "", "")
    for name, username, page in pages:
        median, p95, queries = timed_page(clients[username], page, args.repeat)
        figure(
            f"{name} ({queries} queries)",
            median,
            "ms",
            anchor=anchor,
            goal=f"<= 30 ms (p95 {p95:.1f})",
        )
        if median > worst[0]:
            worst = (median, username, page)
    _, username, page = worst
    ms, plan = slowest_query(clients[username], page)
    print(f"\nslowest page {page}: its slowest query ({ms:.1f} ms under EXPLAIN ANALYZE)\n{plan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
