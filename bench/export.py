"""Audit JSONL export and chain verification on a generated chain (Postgres).

Generates N audit events forming a valid version 2 chain (bench.datagen.audit_generate: Python
templates + COPY) in a scratch database, then times, beside anchors measured in the same run:

- the JSONL export (audit.exports.export_stream, the code behind /api/audit/export.jsonl), in
  a child process so its peak RSS is its own; anchor: a raw ``COPY (SELECT ...) TO STDOUT`` of
  the same rows' columns (what the database hands over, no Python per row);
- chain_verify_db (the /audit/verify/ page and API); anchor: hashlib alone over the same bytes
  (sha256 of prev_hash + canonical per row, the least any verifier must do).

    .venv/bin/python bench/export.py                  # 2M events
    .venv/bin/python bench/export.py --rows 200000    # quick
    .venv/bin/python bench/export.py --rows 20000000  # 20M: generation takes minutes

BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/bench_export) is created
when missing and regenerated when it does not hold exactly --rows events (or with --fresh).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_export"
sys.path.insert(0, str(ROOT))

from bench.datagen import audit_generate, database_prepare  # noqa: E402
from bench.report import figure, section  # noqa: E402


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=int(os.environ.get("BENCH_AUDIT_ROWS", 2_000_000))
    )
    parser.add_argument("--fresh", action="store_true", help="regenerate even if the rows exist")
    parser.add_argument("--child", choices=["export"], help=argparse.SUPPRESS)
    return parser.parse_args()


def django_setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()


def child_export() -> None:
    """Stream one unfiltered JSONL export to /dev/null; print rows, seconds, peak RSS (MiB)."""
    from django.contrib.auth.models import User

    from audit.exports import export_stream
    from audit.manifests import export_start
    from audit.models import AuditEvent

    user, _ = User.objects.get_or_create(username="bench-compliance", is_superuser=True)
    export = export_start(user=user, format="jsonl", filters={})
    started, cpu = time.perf_counter(), time.process_time()
    size = 0
    with open(os.devnull, "wb") as sink:
        for chunk in export_stream(export=export, events=AuditEvent.objects.all()):
            size += len(chunk)
            sink.write(chunk)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = peak_rss_mib()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    export.refresh_from_db()
    figures = {"rows": export.row_count, "seconds": seconds, "cpu": cpu, "bytes": size}
    print(json.dumps({**figures, "peak_mib": peak, "ru_maxrss_mib": maxrss}))


def peak_rss_mib() -> float:
    """This process's peak RSS: VmHWM (ru_maxrss would count the parent's at the fork)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def raw_copy_seconds(url: str) -> tuple[int, float]:
    import psycopg

    query = (
        "COPY (SELECT seq, at, actor, actor_user_id, actor_username, action, run_id, "
        "approval_id, tool, data, ip, user_agent, prev_hash, hash, chain_version, canonical "
        "FROM audit_auditevent ORDER BY seq) TO STDOUT"
    )
    started = time.perf_counter()
    size = 0
    with psycopg.connect(url) as conn, conn.cursor() as cursor, cursor.copy(query) as copy:
        for block in copy:
            size += len(block)
    return size, time.perf_counter() - started


def hashlib_seconds() -> tuple[int, float]:
    """sha256(prev_hash + canonical) per row, over rows already in memory (one batch at a time)."""
    from django.db import connection

    total = 0.0
    count = 0
    sha256 = hashlib.sha256
    with connection.chunked_cursor() as cursor:
        cursor.execute("SELECT prev_hash, canonical FROM audit_auditevent ORDER BY seq")
        while batch := cursor.fetchmany(50_000):
            started = time.perf_counter()
            for prev, text in batch:
                sha256((prev + text).encode()).hexdigest()
            total += time.perf_counter() - started
            count += len(batch)
    return count, total


def main() -> int:
    args = arguments()
    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    if args.child:
        django_setup(url)
        child_export()
        return 0
    generate = database_prepare(
        url, rows=args.rows, fresh=args.fresh, table="audit_auditevent", at_least=True
    )
    django_setup(url)
    from django.core.management import call_command
    from django.db import connection

    from audit.verify import chain_verify_db

    if generate:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        audit_generate(rows=args.rows)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE audit_auditevent")
        print(f"generated {args.rows:,} audit events in {time.perf_counter() - started:.1f} s")
    label = f"{args.rows / 1e6:g}M rows"
    section(f"Audit export and verify, {label} (Postgres)")

    size, copy_seconds = raw_copy_seconds(url)
    copy_rate = args.rows / copy_seconds / 1000
    child = subprocess.run(
        [sys.executable, __file__, "--child", "export", "--rows", str(args.rows)],
        capture_output=True, text=True, check=True, env={**os.environ, "BENCH_DATABASE_URL": url},
    )  # fmt: skip
    exported = json.loads(child.stdout.strip().splitlines()[-1])
    rate = exported["rows"] / exported["seconds"] / 1000
    figure(
        f"JSONL export, {label}, per wall-second",
        rate,
        "k rows/s",
        anchor=("raw COPY TO STDOUT", copy_rate),
        goal=">= 150k rows/s",
    )
    cpu_rate = exported["rows"] / exported["cpu"] / 1000
    figure(f"JSONL export, {label}, per CPU-second of the process", cpu_rate, "k rows/s")
    figure(f"JSONL export peak RSS (VmHWM), {label}", exported["peak_mib"], "MiB", goal="<= 150 MB")
    figure(f"JSONL export ru_maxrss, {label}", exported["ru_maxrss_mib"], "MiB", goal="<= 150 MB")

    count, hash_seconds = hashlib_seconds()
    started, cpu = time.perf_counter(), time.process_time()
    result = chain_verify_db()
    verify_seconds, verify_cpu = time.perf_counter() - started, time.process_time() - cpu
    if not result.ok:
        print(f"verify FAILED at seq {result.broken_seq}: {result.reason}")
        return 1
    figure(f"chain_verify_db, {label}, per wall-second", result.count / verify_seconds / 1000, "k rows/s", anchor=("hashlib alone", count / hash_seconds / 1000), goal=">= 300k rows/s")  # fmt: skip
    figure(f"chain_verify_db, {label}, per CPU-second of the process", result.count / verify_cpu / 1000, "k rows/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
