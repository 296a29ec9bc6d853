"""Twenty incident runs complete, each effect applied once, while the worker keeps dying."""

from __future__ import annotations

import datetime as dt
import random
import time
from collections import Counter
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Effect, SandboxDeploy, SandboxNotification, SandboxTicket
from agents.selectors import run_interrupts_without_approval
from approvals.models import AgentRun
from tests.support.processes import logs_section
from tests.support.runs import (
    TERMINAL,
    approval_approve,
    approvals_pending_list,
    run_get,
    run_start,
)

pytestmark = [
    pytest.mark.durability,
    pytest.mark.django_db(transaction=True),
]

SEED = 20_261_129
RUNS = 20
START_EVERY_S = 1.5
TIME_LIMIT_S = 330  # the whole test stays under six minutes
TICKET, ROLLBACK, NOTIFY = "create_incident_ticket", "rollback_deploy", "notify_channel"


def chaos_plan(rng: random.Random) -> tuple[list[dict[str, str]], set[str], list[float]]:
    """(run inputs, services with a deploy ten minutes ago, kill moments in seconds)."""
    severities = ["sev1", "sev2", "sev3", "sev4"] * (RUNS // 4)
    rng.shuffle(severities)
    inputs = [
        {"service": f"chaos-{i:02d}", "signal": f"error rate {5 + i}%", "severity": severity}
        for i, severity in enumerate(severities)
    ]
    # Every other service has a fresh deploy: the copilot rolls those back at sev1/sev2 and
    # opens a ticket otherwise, so both kinds of effect run under the kills.
    deployed = {run_input["service"] for run_input in inputs[::2]}
    kills = sorted(rng.uniform(2.0, RUNS * START_EVERY_S + 15.0) for _ in range(rng.randint(4, 6)))
    return inputs, deployed, kills


def test_twenty_runs_complete_with_each_effect_once_while_the_worker_is_killed_at_random(
    processes, api_client_for, alice, bob, carol
):
    rng = random.Random(SEED)
    inputs, deployed, kills = chaos_plan(rng)
    for service in sorted(deployed):
        SandboxDeploy.objects.create(
            idempotency_key=f"chaos-seed:{service}",
            service=service,
            version="2.1.0",
            previous_version="2.0.9",
            deployed_at=timezone.now() - dt.timedelta(minutes=10),
        )
    seeded_deploys = SandboxDeploy.objects.count()

    processes.web()
    # A short hold in each sandbox write widens the window in which a kill lands mid-effect.
    worker = processes.worker(sandbox_delay_s=0.5)
    alice_api, bob_api, carol_api = (api_client_for(u) for u in (alice, bob, carol))
    approver_for_tier = {"write": bob_api}  # carol decides every other tier

    began = time.monotonic()
    run_ids: list[str] = []
    decided: set[int] = set()
    statuses: dict[str, str] = {}
    kills_done = 0

    def elapsed() -> float:
        return time.monotonic() - began

    while True:
        while len(run_ids) < RUNS and elapsed() >= len(run_ids) * START_EVERY_S:
            run_input = inputs[len(run_ids)]
            run_ids.append(run_start(alice_api, agent="incident_copilot", input=run_input)["id"])
        if kills_done < len(kills) and elapsed() >= kills[kills_done]:
            worker.kill()
            time.sleep(rng.uniform(0.2, 2.0))
            worker.start()
            kills_done += 1
        for approval in approvals_pending_list(carol_api):
            if approval["id"] not in decided:
                approval_approve(approver_for_tier.get(approval["tier"], carol_api), approval)
                decided.add(approval["id"])
        for run_id in run_ids:
            if statuses.get(run_id) != "completed":
                run = run_get(alice_api, run_id)
                statuses[run_id] = run["status"]
                if run["status"] in TERMINAL and run["status"] != "completed":
                    pytest.fail(f"run {run_id} ended {run['status']}: {run}\n{logs(processes)}")
        finished = Counter(statuses.values())["completed"] == RUNS
        if finished and kills_done == len(kills):
            break
        if elapsed() > TIME_LIMIT_S:
            pytest.fail(
                f"after {TIME_LIMIT_S}s: {Counter(statuses.values())} of {RUNS} runs, "
                f"{kills_done}/{len(kills)} kills\n{logs(processes)}"
            )
        time.sleep(0.5)

    runs = [run_get(alice_api, run_id) for run_id in run_ids]
    assert all(run["status"] == "completed" for run in runs)
    approved_tool: dict[str, str] = {}
    for run in runs:
        # Every pause was surfaced as an approval request, and every one was decided.
        assert len(run["approvals"]) >= 1, run
        assert all(a["status"] == "approved" for a in run["approvals"]), run
        [action] = [a for a in run["approvals"] if a["tool"] in (TICKET, ROLLBACK)]
        approved_tool[run["id"]] = action["tool"]
        assert Counter(e["tool"] for e in run["effects"]) == Counter({action["tool"]: 1, NOTIFY: 1})
    # Every interrupt any run ever raised (read from its checkpoint history) has its request.
    for run in AgentRun.objects.all():
        assert run_interrupts_without_approval(run=run) == [], run.pk
    wanted = Counter(approved_tool.values())
    assert wanted[TICKET] > 0 and wanted[ROLLBACK] > 0, wanted

    assert set(Effect.objects.values_list("status", flat=True)) == {Effect.Status.SUCCEEDED}
    assert_sandbox_matches_effects(SandboxTicket.objects.all(), TICKET, wanted[TICKET])
    assert_sandbox_matches_effects(
        SandboxDeploy.objects.filter(is_rollback=True), ROLLBACK, wanted[ROLLBACK]
    )
    assert_sandbox_matches_effects(SandboxNotification.objects.all(), NOTIFY, RUNS)
    assert SandboxDeploy.objects.count() == seeded_deploys + wanted[ROLLBACK]
    assert elapsed() < TIME_LIMIT_S


def assert_sandbox_matches_effects(rows: Any, tool: str, expected: int) -> None:
    """One downstream row per effect of ``tool``, under the effect's own idempotency key."""
    sandbox_keys = sorted(rows.values_list("idempotency_key", flat=True))
    effect_keys = sorted(Effect.objects.filter(tool=tool).values_list("key", flat=True))
    assert len(sandbox_keys) == expected, (tool, sandbox_keys)
    assert sandbox_keys == effect_keys, tool


def logs(processes: Any) -> str:
    return logs_section(processes.all, lines=60)
