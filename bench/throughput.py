"""Runs per minute end to end: started over the API, approved over the API, 2 qcluster workers.

For each broker (ORM broker on Postgres, Redis broker on Postgres) the script starts gunicorn
and a qcluster (2 workers, the settings' defaults), starts BENCH_RUNS incident runs over the
API as alice from one thread, while a scripted approver (bob) lists pending approvals over
the API and approves each as soon as it appears. It prints runs per minute from the first
start to the last completion, and where the time went:

- the advance itself: django-q2's own started/stopped of every ``run_advance`` task, as a
  share of the two workers' time;
- waiting in the broker: from the moment a run could be advanced (created, or its approval
  decided) to the moment a worker started the task, per hop;
- HTTP: the client's time per request (start, list, decide).

    .venv/bin/python bench/throughput.py                 # 100 runs per broker
    BENCH_RUNS=200 BENCH_SETUPS=orm-postgres .venv/bin/python bench/throughput.py

The Postgres database is BENCH_DATABASE_URL (dropped and made again; default
postgres://postgres@127.0.0.1:5432/bench_wakeup), Redis BENCH_REDIS_URL (default
redis://127.0.0.1:6379/15), as in bench/wakeup.py.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report import setups_each  # noqa: E402
from bench.wakeup import INCIDENT, SCRATCH, setup_environment, stack_running  # noqa: E402

SETUPS = ("orm-postgres", "redis-postgres")
WORKERS = 2


class Timings:
    """Client-side seconds per kind of request, from several threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, list[float]] = {}

    def timed(self, kind: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            with self.lock:
                self.seconds.setdefault(kind, []).append(time.perf_counter() - started)


def runs_start(stack: dict[str, Any], *, count: int, timings: Timings, ids: list[str]) -> None:
    alice = stack["alice"]
    for _ in range(count):
        body = {"agent": "incident_copilot", "input": INCIDENT}
        ids.append(
            timings.timed("POST /api/runs/", alice.post, "/api/runs/", body, expect=201)["id"]
        )


def approver(stack: dict[str, Any], *, timings: Timings, stop: threading.Event) -> None:
    """Approve every pending approval bob can see, as soon as it is listed."""
    bob = stack["bob"]
    while not stop.is_set():
        page = timings.timed(
            "GET /api/approvals/", bob.get, "/api/approvals/?status=pending&page_size=100"
        )
        pending = page["results"] if isinstance(page, dict) else page
        for approval in pending:
            body = {"decision": "approve", "payload_hash": approval["payload_hash"]}
            timings.timed(
                "POST decision",
                bob.post,
                f"/api/approvals/{approval['id']}/decision/",
                body,
                expect=(200, 409),  # 409: a quorum or an earlier pass already closed it
            )
        if not pending:
            time.sleep(0.01)


def breakdown(run_ids: list[str]) -> dict[str, list[float]]:
    """Seconds per run between its audit events (one clock: the database rows' own times).

    queued: created -> started (a worker took the lease), decided -> resumed; advance:
    started -> waiting, resumed -> completed; approver: waiting -> decided.
    """
    from audit.models import AuditEvent

    marks: dict[str, dict[str, Any]] = {}
    events = AuditEvent.objects.filter(run_id__in=run_ids).order_by("id")
    for run_id, action, at in events.values_list("run_id", "action", "at"):
        marks.setdefault(str(run_id), {}).setdefault(action, at)  # the first of each kind
    spans = {"queued": [], "advance": [], "approver": []}
    pairs = (
        ("queued", "run.created", "run.started"),
        ("advance", "run.started", "run.waiting"),
        ("approver", "run.waiting", "approval.decided"),
        ("queued", "approval.decided", "run.resumed"),
        ("advance", "run.resumed", "run.completed"),
    )
    for run in marks.values():
        for kind, start, end in pairs:
            if start in run and end in run:
                spans[kind].append((run[end] - run[start]).total_seconds())
    return spans


def tasks_by_name() -> dict[str, int]:
    from django.db.models import Count
    from django_q.models import Task

    return dict(Task.objects.values_list("func").annotate(n=Count("id")).order_by("func"))


def setup_measure(setup: str) -> int:
    from bench.report import figure, section

    count = int(os.environ.get("BENCH_RUNS", "100"))
    scratch = SCRATCH / f"throughput-{setup}"
    setup_environment(setup, scratch)
    with stack_running(scratch, workers=WORKERS) as stack:
        from approvals.models import AgentRun

        timings, ids, stop = Timings(), [], threading.Event()
        # Warm-up: one run through, so imports and graph builds are not in the figure.
        warm = threading.Thread(
            target=approver, args=(stack,), kwargs={"timings": Timings(), "stop": stop}
        )
        warm.start()
        warm_ids: list[str] = []
        runs_start(stack, count=1, timings=Timings(), ids=warm_ids)
        while not AgentRun.objects.filter(pk__in=warm_ids, status="completed").exists():
            time.sleep(0.05)
        stop.set()
        warm.join()

        stop = threading.Event()
        started = time.perf_counter()
        threads = [
            threading.Thread(
                target=runs_start,
                args=(stack,),
                kwargs={"count": count, "timings": timings, "ids": ids},
            ),
            threading.Thread(
                target=approver, args=(stack,), kwargs={"timings": timings, "stop": stop}
            ),
        ]
        for thread in threads:
            thread.start()
        deadline = started + 60 + count * 3
        done = 0
        while time.perf_counter() < deadline:
            done = AgentRun.objects.filter(pk__in=list(ids), status="completed").count()
            if done == count:
                break
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        stop.set()
        for thread in threads:
            thread.join()
        if done != count:
            print(f"{setup}: only {done} of {count} runs completed in {elapsed:.0f} s")
            return 1
        spans = breakdown(ids)
        tasks = tasks_by_name()
    section(f"{setup}: {count} runs, {WORKERS} workers, one starter and one approver thread")
    per_minute = count / elapsed * 60
    advance = spans["advance"]
    per_run = sum(advance) / count
    figure(
        f"{setup} runs per minute",
        per_minute,
        "runs",
        anchor=("2 workers doing only advances", 60 * WORKERS / per_run),
        goal=">= 600",
    )
    figure(f"{setup} one advance (lease taken -> released) p50", median_ms(advance), "ms")
    figure(f"{setup} advances per run, worker time", per_run * 1000, "ms")
    figure(f"{setup} workers' time in advances", sum(advance) / (WORKERS * elapsed) * 100, "%")
    figure(f"{setup} queued before a worker took it p50", median_ms(spans["queued"]), "ms")
    figure(f"{setup} approver (waiting -> decided) p50", median_ms(spans["approver"]), "ms")
    for kind, values in sorted(timings.seconds.items()):
        figure(f"{setup} HTTP {kind} p50 (n={len(values)})", median_ms(values), "ms")
    print(f"  tasks run (saved results): {tasks}")
    return 0


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def main() -> int:
    return setups_each(
        script=__file__, setups=SETUPS, variable="BENCH_THROUGHPUT_SETUP", measure=setup_measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
