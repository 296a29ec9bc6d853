"""One incident run in-process: Django queries and time, beside the bare graph and one commit.

Drives ``incident_copilot`` (severity sev3: a write-tier ticket, the demo policy seeded) start
-> waiting -> approve -> completed through the same services a worker and a reviewer call:
``run_start``, ``run_advance`` (the task's body), ``approval_decide``, ``run_advance``. The
queue is recorded, not run: each queued advance is called inline, notification deliveries
(a separate task) are left queued. Per run it prints the time and the Django queries (the
checkpointer's own connection is not Django's and is not counted), and the anchors measured in
the same process: the same graph with ``InMemorySaver``, no runner and no Django (what its nodes
ask Django is answered from memory; checked: 0 queries), and one ``INSERT`` + ``COMMIT`` round
trip. "Durable overhead per step" is (run ms - bare ms) / steps. Queries are counted as
``CaptureQueriesContext`` counts them (``BEGIN`` and ``COMMIT`` included), as the tests assert.

    .venv/bin/python bench/run_inprocess.py                  # SQLite and Postgres, 5 runs each
    .venv/bin/python bench/run_inprocess.py --runs 20 --db postgres --callers

Postgres uses the scratch database ``bench_run`` (BENCH_DATABASE_URL; dropped, created and
migrated on each start); SQLite a file in a temporary directory. Each database runs in a child
process (Django binds its database at start-up). BENCH_SQL_LOG=1 prints every query counted,
by phase.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_run"
sys.path.insert(0, str(ROOT))

GOAL_QUERIES = "<= 40 queries"
GOAL_OVERHEAD = "<= 3 ms/step"
PROJECT_DIRS = ("agents", "approvals", "audit", "core", "console")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per database")
    parser.add_argument("--db", choices=("both", "sqlite", "postgres"), default="both")
    parser.add_argument(
        "--callers", action="store_true", help="print the queries of one run by calling function"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the timed runs: Django round trips, checkpointer, the rest (Python)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> int:
    args = arguments()
    if args.child:
        return child(args)
    databases = ("sqlite", "postgres") if args.db == "both" else (args.db,)
    status = 0
    for db in databases:
        env = dict(os.environ)
        with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
            if db == "postgres":
                url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
                _postgres_fresh(url)
            else:
                url = f"sqlite:///{tmp}/db.sqlite3"
            env.update(
                DATABASE_URL=url,
                CHECKPOINT_SQLITE_PATH=f"{tmp}/checkpoints.sqlite3",
                DJANGO_SETTINGS_MODULE="console.settings",
                CONSOLE_VAR_DIR=tmp,
                AGENT_MODEL="",
                Q_SYNC="false",
            )
            command = [sys.executable, __file__, "--child", "--runs", str(args.runs), "--db", db]
            if args.callers:
                command.append("--callers")
            if args.profile:
                command.append("--profile")
            status |= subprocess.call(command, env=env, cwd=ROOT)
    return status


def _postgres_fresh(url: str) -> None:
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name.startswith(("bench_", "w_")):
        raise SystemExit(
            f"refusing to drop {name!r}: a scratch database's name starts bench_ (or w_)"
        )
    maintenance = parts._replace(path="/postgres").geturl()
    with psycopg.connect(maintenance, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


# --- the child: one database ---------------------------------------------------------------


def child(args: argparse.Namespace) -> int:
    import django

    django.setup()
    import logging

    logging.disable(logging.INFO)  # the runner logs each outcome; the figures are the output
    from django.core.management import call_command

    from bench.report import section

    call_command("migrate", verbosity=0)
    people = _people()
    section(f"one incident run in-process, {args.db} ({args.runs} runs after one warm-up)")
    _one_run(people)  # warm-up: imports, compiled graph, prepared caches
    if args.profile:
        _profile(people, args.runs)
        return 0
    runs = [_one_run(people) for _ in range(args.runs)]
    bare = [_bare_run() for _ in range(args.runs + 1)][1:]
    commit_ms = _insert_commit_ms()
    _print(args.db, runs, bare, commit_ms)
    if args.callers:
        _print_callers(_one_run(people, callers=True))
    return 0


# Where the time of a run goes, by the outermost call of each kind (cumulative seconds):
# Django's statements (the round trip and the driver), the checkpointer's methods (its own
# connection), and everything else (LangGraph, the nodes, our Python).
_PROFILE_BUCKETS = {
    "Django statements (round trips + driver)": (("django/db/backends/utils.py", "_execute"),),
    "checkpointer (put, put_writes, get_tuple, list)": tuple(
        ("agents/runtime/fenced_saver.py", name) for name in ("put", "put_writes", "list")
    )
    + (("agents/runtime/fast_saver.py", "get_tuple"),),
}


def _profile(people: dict[str, Any], runs: int) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in range(runs):
        _one_run(people)
    profiler.disable()
    total = (time.perf_counter() - started) * 1000 / runs
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    print(f"  profile, per run (mean of {runs}): {total:.1f} ms under cProfile")
    accounted = 0.0
    for label, functions in _PROFILE_BUCKETS.items():
        ms = calls = 0.0
        for (filename, _, name), (_, ncalls, _, cumulative, _) in stats.items():
            if any(filename.endswith(f) and name == n for f, n in functions):
                ms += cumulative * 1000 / runs
                calls += ncalls / runs
        accounted += ms
        print(f"    {label:<50} {ms:8.1f} ms  ({calls:.0f} calls)")
    print(f"    {'the rest (LangGraph, nodes, our Python)':<50} {total - accounted:8.1f} ms")
    ranked = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:12]
    print("    top functions by own time:")
    for (filename, line, name), (_, ncalls, own, _, _) in ranked:
        where = f"{Path(filename).name}:{line} {name}"
        print(f"      {own * 1000 / runs:7.2f} ms  {ncalls / runs:6.0f} calls  {where}")


def _people() -> dict[str, Any]:
    from django.contrib.auth.models import Group, User

    from approvals.services import policy_seed_demo

    policy_seed_demo()
    alice = User.objects.create_user("alice", email="alice@example.com", password="bench")
    bob = User.objects.create_user("bob", email="bob@example.com", password="bench")
    bob.groups.add(Group.objects.get(name="approvers-write"))
    return {"alice": alice, "bob": bob}


class _Recorder:
    """Stands in for ``async_task``: what the code queues is kept, nothing runs."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(args)

    def take(self, name: str) -> list[tuple[Any, ...]]:
        taken = [call for call in self.calls if call and call[0] == name]
        self.calls = [call for call in self.calls if call not in taken]
        return taken


class _Captured:
    """Every query Django runs, counted as CaptureQueriesContext counts them (which is what
    ``django_assert_max_num_queries`` asserts: COMMIT and SQLite's BEGIN IMMEDIATE included),
    per phase; with ``callers``, each statement also by the innermost project function that
    ran it (a wrapper sees statements, not COMMIT)."""

    def __init__(self, *, callers: bool) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        self.callers = callers
        self.log = CaptureQueriesContext(connection)
        self._phase_from = 0
        self.by_phase: Counter[str] = Counter()
        self.phase_ms: Counter[str] = Counter()
        self._phase_started = time.perf_counter()
        self.by_caller: dict[str, list[float]] = defaultdict(list)
        self.phase = ""

    def enter(self, phase: str) -> None:
        """Start timing ``phase`` (the previous one ends here)."""
        now = time.perf_counter()
        if self.phase:
            self.phase_ms[self.phase] += (now - self._phase_started) * 1000
            self.by_phase[self.phase] += len(self.log) - self._phase_from
            if os.environ.get("BENCH_SQL_LOG"):
                for query in self.log.captured_queries[self._phase_from :]:
                    print(f"    <{self.phase}> {query['sql'][:110]}")
        self._phase_from = len(self.log)
        self.phase, self._phase_started = phase, now

    @property
    def count(self) -> int:
        return sum(self.by_phase.values())

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            if self.callers:
                self.by_caller[_caller()].append((time.perf_counter() - started) * 1000)


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()[:-3]):
        rel = os.path.relpath(frame.filename, ROOT)
        if rel.split(os.sep)[0] in PROJECT_DIRS:
            return f"{rel.removesuffix('.py').replace(os.sep, '.')}.{frame.name}"
    return "(outside the project)"


def _one_run(people: dict[str, Any], *, callers: bool = False) -> dict[str, Any]:
    from unittest import mock

    from django.db import connection

    from agents import services as agent_services
    from agents.tasks import run_advance
    from approvals import notifications
    from approvals.models import AgentRun
    from approvals.services import RUN_ADVANCE_TASK, approval_decide
    from approvals.services import runs as approval_runs

    queue = _Recorder()
    captured = _Captured(callers=callers)

    def advance_queued() -> str:
        outcomes = [run_advance(call[1]) for call in queue.take(RUN_ADVANCE_TASK)]
        return outcomes[-1] if outcomes else "nothing queued"

    incident = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev3"}
    with contextlib.ExitStack() as stack:
        for module in (approval_runs, agent_services, notifications):
            if hasattr(module, "async_task"):
                stack.enter_context(mock.patch.object(module, "async_task", queue))
        stack.enter_context(captured.log)
        stack.enter_context(connection.execute_wrapper(captured))
        started = time.perf_counter()
        captured.enter("start")
        run = agent_services.run_start(
            agent="incident_copilot", input=incident, user=people["alice"]
        )
        captured.enter("advance to waiting")
        waiting = advance_queued()
        captured.enter("decide")
        approval = run.approvals.get()
        approval_decide(
            approval=approval,
            user=people["bob"],
            decision="approve",
            seen_hash=approval.payload_hash,
        )
        captured.enter("advance to completed")
        completed = advance_queued()
        captured.enter("")
        elapsed = (time.perf_counter() - started) * 1000
    run = AgentRun.objects.get(pk=run.pk)
    if (waiting, completed, run.status) != ("waiting", "completed", "completed"):
        raise SystemExit(f"the run did not complete: {waiting!r}, {completed!r}, {run.status}")
    return {
        "ms": elapsed,
        "queries": captured.count,
        "phases": dict(captured.by_phase),
        "phase_ms": dict(captured.phase_ms),
        "steps": run.steps_used,
        "callers": captured.by_caller,
    }


def _bare_stubs() -> contextlib.ExitStack:
    """What the graph's nodes ask Django, answered from memory: the read tools' answers (taken
    once from the sandbox), the policy's code defaults, a ledger that only returns a result."""
    from unittest import mock

    from agents.graphs.incident_copilot import graph as incident
    from agents.graphs.incident_copilot.tools import READ_TOOLS
    from approvals import policy

    real = incident.tool_get
    answers = {
        "fetch_metrics": real("fetch_metrics").run(
            {"service": "checkout", "window_minutes": 60}, None
        ),
        "search_logs": real("search_logs").run(
            {"service": "checkout", "query": "5xx above 5%", "limit": 5}, None
        ),
        "list_recent_deploys": real("list_recent_deploys").run(
            {"service": "checkout", "hours": 24}, None
        ),
    }

    class _Answered:
        def __init__(self, name: str) -> None:
            self.spec = real(name)
            self.name = name

        def run(self, args: dict[str, Any], key: Any) -> Any:
            return answers[self.name]

        def __getattr__(self, attr: str) -> Any:
            return getattr(self.spec, attr)

    def tool_get(name: str) -> Any:
        return _Answered(name) if name in READ_TOOLS else real(name)

    def effect_execute(**kwargs: Any) -> dict[str, Any]:
        return {"status": "done", "key": kwargs["key"]}

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(incident, "tool_get", tool_get))
    stack.enter_context(mock.patch.object(incident, "effect_execute", effect_execute))
    stack.enter_context(mock.patch.object(policy, "tier_get", lambda name: None))
    stack.enter_context(
        mock.patch.object(policy, "tier_for_call", lambda **call: call["default_tier"])
    )
    return stack


def _bare_run() -> dict[str, Any]:
    """The same graph and offline model with InMemorySaver, driven directly: no runner, and
    no Django (``_bare_stubs``; the Django queries it made are counted and must be 0)."""
    import uuid

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from agents.graphs.incident_copilot.graph import build

    graph = build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    incident = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev3"}
    with _bare_stubs(), CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        stream = graph.stream(incident, config, stream_mode="updates", durability="sync")
        steps = sum(1 for update in stream if "__interrupt__" not in update)
        (interrupt,) = graph.get_state(config).interrupts
        value = {"decision": "approve", "args": {}, "message": "", "by": "bob", "approval_id": None}
        resume = Command(resume={interrupt.id: value})
        stream = graph.stream(resume, config, stream_mode="updates", durability="sync")
        steps += sum(1 for update in stream if "__interrupt__" not in update)
        elapsed = (time.perf_counter() - started) * 1000
    if graph.get_state(config).next:
        raise SystemExit("the bare graph did not finish")
    if len(queries):
        raise SystemExit(f"the bare graph asked Django {len(queries)} queries: {queries[0]['sql']}")
    return {"ms": elapsed, "steps": steps}


def _insert_commit_ms(repeat: int = 50) -> float:
    """One INSERT and its COMMIT through Django's connection, median of ``repeat``."""
    from django.db import connection, transaction

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_commit (id integer, note text)")
    times = []
    for n in range(repeat):
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("INSERT INTO bench_commit (id, note) VALUES (%s, %s)", [n, "x"])
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _print(
    db: str, runs: list[dict[str, Any]], bare: list[dict[str, Any]], commit_ms: float
) -> None:
    from bench.report import figure

    run_ms = statistics.median(r["ms"] for r in runs)
    worker_ms = statistics.median(
        r["phase_ms"]["advance to waiting"] + r["phase_ms"]["advance to completed"] for r in runs
    )
    bare_ms = statistics.median(b["ms"] for b in bare)
    queries = max(r["queries"] for r in runs)
    steps = runs[0]["steps"] or 1
    bare_steps = bare[0]["steps"] or 1
    figure(f"{db}: one run, start -> completed", run_ms, "ms", anchor=("bare graph", bare_ms))
    figure(f"{db}:   of which the two advances", worker_ms, "ms", anchor=("bare graph", bare_ms))
    figure(f"{db}: Django queries per run", queries, "q", goal=GOAL_QUERIES)
    for phase in ("start", "advance to waiting", "decide", "advance to completed"):
        count = max(r["phases"].get(phase, 0) for r in runs)
        ms = statistics.median(r["phase_ms"].get(phase, 0.0) for r in runs)
        figure(f"{db}:   {phase} ({ms:.1f} ms)", count, "q")
    figure(
        f"{db}: bare graph (InMemorySaver, no Django) per step",
        bare_ms / bare_steps,
        "ms",
        anchor=("INSERT+COMMIT", commit_ms),
    )
    figure(
        f"{db}: durable overhead per step, whole run",
        (run_ms - bare_ms) / steps,
        "ms",
        anchor=("INSERT+COMMIT", commit_ms),
        goal=GOAL_OVERHEAD,
    )
    figure(
        f"{db}: durable overhead per step, the advances",
        (worker_ms - bare_ms) / steps,
        "ms",
        anchor=("INSERT+COMMIT", commit_ms),
        goal=GOAL_OVERHEAD,
    )


def _print_callers(run: dict[str, Any]) -> None:
    print("\n  queries of one run by the innermost project function that ran them:")
    rows = sorted(run["callers"].items(), key=lambda item: -len(item[1]))
    for caller, times in rows:
        print(f"    {len(times):4d}  {sum(times):7.1f} ms  {caller}")


if __name__ == "__main__":
    sys.exit(main())
