"""How long a killed worker's run waits before another worker picks it up (default settings).

Starts a web server and a qcluster with the settings' default timings (Q_TIMEOUT, Q_RETRY,
RUN_LEASE_SECONDS, ...) against a scratch database, brings an incident run to the moment the
sandbox has written its ticket but not yet answered, SIGKILLs the worker, starts a fresh one,
and prints how long the run took to be picked up and to complete.

    .venv/bin/python bench/pickup.py          # scratch SQLite under var/bench/pickup/
    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_pickup .venv/bin/python bench/pickup.py

BENCH_DATABASE_URL must name a scratch database that exists: the script migrates it and adds
rows to it.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / "var" / "bench" / "pickup"
# Variables that would change the timings being measured: the defaults in settings.py apply.
TIMING_VARIABLES = (
    "Q_SYNC",
    "Q_TIMEOUT",
    "Q_RETRY",
    "Q_POLL",
    "Q_WORKERS",
    "Q_BROKER",
    "RUN_LEASE_SECONDS",
    "RUN_HEARTBEAT_SECONDS",
    "SANDBOX_EFFECT_DELAY_S",
)
HOLD_S = 30.0  # the first worker's sandbox holds its answer this long (below Q_TIMEOUT's 45 s)
INCIDENT = {"service": "payments", "signal": "error rate 12%", "severity": "sev3"}


def environment_prepare() -> None:
    for name in TIMING_VARIABLES:
        os.environ.pop(name, None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(parents=True)
    os.environ["CONSOLE_VAR_DIR"] = str(SCRATCH)
    if os.environ.get("BENCH_DATABASE_URL"):
        os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"]
    else:
        os.environ.pop("DATABASE_URL", None)  # SQLite under CONSOLE_VAR_DIR


def main() -> int:
    sys.path.insert(0, str(ROOT))
    environment_prepare()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from agents.models import Effect, SandboxTicket
    from approvals.models import AgentRun
    from console.management.commands.serve import worker_command
    from tests.support.processes import (
        ApiClient,
        ManagedProcess,
        WebServer,
        free_port,
        poll_until,
    )
    from tests.support.runs import (
        approval_approve,
        is_completed,
        is_waiting_for_a_person,
        pending_approvals,
        run_start,
        run_wait,
    )

    call_command("migrate", verbosity=0)
    call_command("seed_demo", stdout=open(os.devnull, "w"))  # noqa: SIM115
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    web = WebServer(name="web", env=env, log_path=SCRATCH / "web.log", port=free_port())
    worker = ManagedProcess(
        name="qcluster",
        command=worker_command(),
        env={**env, "SANDBOX_EFFECT_DELAY_S": str(HOLD_S)},
        log_path=SCRATCH / "qcluster.log",
    )
    procs = [web, worker]
    print(
        f"defaults: Q_TIMEOUT={settings.Q_TIMEOUT}s Q_RETRY={settings.Q_RETRY}s "
        f"RUN_LEASE_SECONDS={settings.RUN_LEASE_SECONDS}s "
        f"RUN_HEARTBEAT_SECONDS={settings.RUN_HEARTBEAT_SECONDS}s, database "
        f"{settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}"
    )
    try:
        web.start()
        worker.start()
        alice = ApiClient.login(base_url=web.base_url, username="alice", password="demo")
        bob = ApiClient.login(base_url=web.base_url, username="bob", password="demo")
        run = run_start(alice, agent="incident_copilot", input=INCIDENT)
        waiting = run_wait(
            alice,
            run["id"],
            until=is_waiting_for_a_person,
            what="a pending approval",
            timeout=120,
            processes=procs,
        )
        approval_approve(bob, pending_approvals(waiting)[0])
        poll_until(
            SandboxTicket.objects.exists,
            timeout=120,
            what="the sandbox ticket",
            interval=0.05,
            processes=procs,
        )
        owner = AgentRun.objects.get(pk=run["id"]).lease_owner
        killed_at = time.monotonic()
        worker.kill()
        worker.start(env={"SANDBOX_EFFECT_DELAY_S": "0"})

        def picked_up() -> bool:
            current = AgentRun.objects.get(pk=run["id"])
            effect = Effect.objects.get(tool="create_incident_ticket")
            moved = bool(current.lease_owner) and current.lease_owner != owner
            return moved or effect.status != Effect.Status.CLAIMED or current.is_terminal

        poll_until(picked_up, timeout=600, what="pick-up", interval=0.1, processes=procs)
        pickup_s = time.monotonic() - killed_at
        run_wait(
            alice, run["id"], until=is_completed, what="completion", timeout=600, processes=procs
        )
        done_s = time.monotonic() - killed_at
    finally:
        for proc in procs:
            proc.kill()
    print(f"pick-up after SIGKILL: {pickup_s:.1f} s")
    print(f"run completed after SIGKILL: {done_s:.1f} s")
    print(f"tickets written: {SandboxTicket.objects.count()} (must be 1)")
    return 0 if SandboxTicket.objects.count() == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
