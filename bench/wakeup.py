"""Decision -> run completed and start -> waiting, with a real web server and qcluster.

For each broker setup (ORM broker on Postgres, ORM broker on SQLite, Redis broker on Postgres)
the script starts gunicorn and a qcluster with the settings' defaults, starts incident runs
over the API as alice, notes when each is waiting for a person, approves it over the API as
bob, and notes when it is completed. Beside them, the anchor: one bare ``async_task`` round
trip (enqueue a no-op task -> its result saved) on the same broker, in the same run.

    .venv/bin/python bench/wakeup.py                 # all three setups, 12 runs each
    BENCH_RUNS=30 BENCH_SETUPS=orm-postgres .venv/bin/python bench/wakeup.py

BENCH_DATABASE_URL names the scratch Postgres database (dropped and made again; default
postgres://postgres@127.0.0.1:5432/bench_wakeup), BENCH_REDIS_URL the Redis database the
Redis setup may empty (default redis://127.0.0.1:6379/15). The SQLite setup lives under
var/bench/wakeup/. The run's state is read from the database every 5 ms (cheaper and finer
than the API), so each figure carries up to 5 ms of observation delay.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report import setups_each  # noqa: E402 - after the path that finds it

SCRATCH = ROOT / "var" / "bench" / "wakeup"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/bench_wakeup"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
SETUPS = ("orm-postgres", "orm-sqlite", "redis-postgres")
# Variables that would change what is measured: the defaults in settings.py apply.
TIMING_VARIABLES = (
    "Q_SYNC",
    "Q_TIMEOUT",
    "Q_RETRY",
    "Q_POLL",
    "Q_WORKERS",
    "Q_BROKER",
    "Q_ORM_LISTEN",
    "RUN_LEASE_SECONDS",
    "RUN_HEARTBEAT_SECONDS",
    "SANDBOX_EFFECT_DELAY_S",
    "DB_CONN_MAX_AGE",
)
INCIDENT = {"service": "payments", "signal": "error rate 12%", "severity": "sev3"}
PROBE_S = 0.005
GOALS = {
    "orm-postgres": ("<= 200 ms", "<= 200 ms"),
    "orm-sqlite": ("", ""),
    "redis-postgres": ("<= 80 ms", "<= 60 ms"),
}


def setup_environment(setup: str, scratch: Path, *, extra: dict[str, str] | None = None) -> None:
    """Point this process (and the children it starts) at ``setup``'s database and broker."""
    for name in TIMING_VARIABLES:
        os.environ.pop(name, None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    os.environ["CONSOLE_VAR_DIR"] = str(scratch)
    broker, _, database = setup.partition("-")
    os.environ["Q_BROKER"] = broker
    if broker == "redis":
        os.environ["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS_URL)
    if database == "postgres":
        url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL)
        sys.path.insert(0, str(ROOT))
        from bench.datagen import database_prepare

        database_prepare(url, rows=0, fresh=True)
        os.environ["DATABASE_URL"] = url
    else:
        os.environ.pop("DATABASE_URL", None)  # SQLite under CONSOLE_VAR_DIR
    os.environ.update(extra or {})
    # BENCH_ENV="DB_CONN_MAX_AGE=60,Q_ORM_LISTEN=false": try a setting against the defaults.
    for pair in filter(None, os.environ.get("BENCH_ENV", "").split(",")):
        name, _, value = pair.partition("=")
        os.environ[name.strip()] = value.strip()


@contextmanager
def stack_running(scratch: Path, *, workers: int | None = None) -> Iterator[dict[str, Any]]:
    """Migrate, seed, start gunicorn + qcluster; yield the processes and alice's/bob's clients."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    logging.getLogger("django-q").setLevel(logging.WARNING)  # one line per enqueue otherwise
    from django.core.management import call_command

    from console.management.commands.serve import worker_command
    from tests.support.processes import ApiClient, ManagedProcess, WebServer, free_port
    from tests.support.throttling import PROCESS_RATES

    call_command("migrate", verbosity=0)
    call_command("seed_demo", stdout=open(os.devnull, "w"))  # noqa: SIM115
    if os.environ["Q_BROKER"] == "redis":
        from django_q.brokers import get_broker

        get_broker().purge_queue()
    env = {**os.environ, **PROCESS_RATES, "PYTHONUNBUFFERED": "1"}
    if workers is not None:
        env["Q_WORKERS"] = str(workers)
    web = WebServer(
        name="web",
        env=env,
        log_path=scratch / "web.log",
        port=int(os.environ.get("BENCH_PORT") or 0) or free_port(),
    )
    worker = ManagedProcess(
        name="qcluster", command=worker_command(), env=env, log_path=scratch / "qcluster.log"
    )
    try:
        web.start()
        worker.start()
        alice = ApiClient.login(base_url=web.base_url, username="alice", password="demo")
        bob = ApiClient.login(base_url=web.base_url, username="bob", password="demo")
        yield {"web": web, "worker": worker, "alice": alice, "bob": bob}
    finally:
        worker.kill()
        web.kill()


def wait_for(probe: Callable[[], Any], *, timeout: float, what: str, procs: list) -> float:
    """Poll ``probe`` every PROBE_S until truthy; the perf_counter when it was seen."""
    deadline = time.perf_counter() + timeout
    while True:
        if probe():
            return time.perf_counter()
        if time.perf_counter() > deadline:
            from tests.support.processes import logs_section

            raise AssertionError(f"timed out waiting for {what}\n{logs_section(procs)}")
        time.sleep(PROBE_S)


def task_round_trip(procs: list) -> float:
    """Seconds from enqueueing a no-op task to its result row being saved."""
    from django_q.models import Task
    from django_q.tasks import async_task

    started = time.perf_counter()
    task_id = async_task("math.floor", 1.5, group="bench")
    done = wait_for(
        Task.objects.filter(id=task_id).exists, timeout=60, what="the no-op task", procs=procs
    )
    return done - started


# Where decision -> completed and start -> waiting go, from the run's own audit events (the
# database's clock) and the client's time per HTTP call: (label, first action, second action).
SPANS = (
    ("start: run.created -> run.started (queue hop, lease)", "run.created", "run.started"),
    ("start: run.started -> run.waiting (the advance)", "run.started", "run.waiting"),
    (
        "decision: approval.decided -> run.resumed (commit, queue hop)",
        "approval.decided",
        "run.resumed",
    ),
    ("decision: run.resumed -> run.completed (the advance)", "run.resumed", "run.completed"),
)


def spans_of(run_ids: list[str]) -> dict[str, list[float]]:
    """Seconds between the audit events of SPANS, per run (the first event of each kind)."""
    from audit.models import AuditEvent

    marks: dict[str, dict[str, Any]] = {}
    rows = AuditEvent.objects.filter(run_id__in=run_ids).order_by("seq")
    for run_id, action, at in rows.values_list("run_id", "action", "at"):
        marks.setdefault(str(run_id), {}).setdefault(action, at)
    spans: dict[str, list[float]] = {label: [] for label, _, _ in SPANS}
    for run in marks.values():
        for label, first, second in SPANS:
            if first in run and second in run:
                spans[label].append((run[second] - run[first]).total_seconds())
    return spans


def run_round_trip(
    stack: dict[str, Any], http: dict[str, list[float]] | None = None, ids: list[str] | None = None
) -> tuple[float, float]:
    """(start -> waiting, decision -> completed) of one incident run, in seconds; the client's
    seconds per HTTP call go to ``http``, the run's id to ``ids``."""
    from approvals.models import AgentRun, ApprovalRequest
    from tests.support.runs import approval_approve, pending_approvals, run_get, run_start

    procs = [stack["web"], stack["worker"]]
    http = http if http is not None else {}
    started = time.perf_counter()
    run_id = run_start(stack["alice"], agent="incident_copilot", input=INCIDENT)["id"]
    http.setdefault("POST /api/runs/", []).append(time.perf_counter() - started)
    if ids is not None:
        ids.append(run_id)
    pending = ApprovalRequest.objects.filter(run_id=run_id, status="pending")
    waiting = wait_for(
        lambda: pending.exists() and AgentRun.objects.filter(pk=run_id, status="waiting").exists(),
        timeout=60,
        what=f"run {run_id} waiting",
        procs=procs,
    )
    approval = pending_approvals(run_get(stack["alice"], run_id))[0]
    decided = time.perf_counter()
    approval_approve(stack["bob"], approval)
    http.setdefault("POST decision", []).append(time.perf_counter() - decided)
    completed = wait_for(
        AgentRun.objects.filter(pk=run_id, status="completed").exists,
        timeout=60,
        what=f"run {run_id} completed",
        procs=procs,
    )
    return waiting - started, completed - decided


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))]


def setup_measure(setup: str) -> int:
    from bench.report import figure, section

    runs = int(os.environ.get("BENCH_RUNS", "12"))
    scratch = SCRATCH / setup
    setup_environment(setup, scratch)
    with stack_running(scratch) as stack:
        from django.conf import settings

        procs = [stack["web"], stack["worker"]]
        run_round_trip(stack)  # warm-up: imports, graph builds, connections
        task_round_trip(procs)
        anchors = [task_round_trip(procs) for _ in range(runs)]
        to_waiting, to_completed = [], []
        http: dict[str, list[float]] = {}
        ids: list[str] = []
        for _ in range(runs):
            waiting, completed = run_round_trip(stack, http, ids)
            to_waiting.append(waiting)
            to_completed.append(completed)
        spans = spans_of(ids)
        broker = settings.Q_CLUSTER.get("broker_class") or settings.Q_BROKER
        poll = settings.Q_CLUSTER["poll"]
    section(f"{setup}: broker {broker}, poll {poll} s, {runs} runs (median of each, p95)")
    anchor_p50 = statistics.median(anchors) * 1000
    anchor = ("bare async_task round trip", anchor_p50)
    goal_completed, goal_waiting = GOALS[setup]
    figure(f"{setup} no-op task enqueue -> result saved p50", anchor_p50, "ms")
    figure(f"{setup} no-op task p95", percentile(anchors, 0.95) * 1000, "ms")
    for label, values, goal in (
        ("decision -> completed", to_completed, goal_completed),
        ("start -> waiting", to_waiting, goal_waiting),
    ):
        figure(
            f"{setup} {label} p50",
            statistics.median(values) * 1000,
            "ms",
            anchor=anchor,
            goal=goal,
        )
        figure(f"{setup} {label} p95", percentile(values, 0.95) * 1000, "ms", anchor=anchor)
    print(f"  where it goes, p50 of {runs} runs:")
    for label, values in (*spans.items(), *((f"HTTP {k} (client)", v) for k, v in http.items())):
        figure(f"  {label}", statistics.median(values) * 1000 if values else float("nan"), "ms")
    return 0


def main() -> int:
    return setups_each(
        script=__file__, setups=SETUPS, variable="BENCH_WAKEUP_SETUP", measure=setup_measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
