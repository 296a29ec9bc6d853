"""Chaos: incident runs against real processes while the worker keeps dying (SIGKILL at seeded
moments). The first test: twenty runs complete, each effect applied once. The second adds
downstream timeouts, cancels and forks (tests/support/chaos.py plans them and checks the end)."""

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
from audit.models import AuditEvent
from tests.support.chaos import (
    APPLIED,
    NOTIFY,
    ROLL_FORWARD,
    ROLLBACK,
    TICKET,
    assert_every_effect_has_its_own_approval,
    assert_one_downstream_row_per_effect,
    assert_run_ended_as_planned,
    call_cut_by_kill,
    deploys_seed,
    effects_unsettled,
    fault_plan,
    runs_not_ended,
)
from tests.support.chaos_driver import AGENT, FaultChaos
from tests.support.faults import faults_acted, faults_injected, faulty_worker_env
from tests.support.people import DECIDE, person
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
    seeded_deploys = deploys_seed(deployed)

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
            run_ids.append(run_start(alice_api, agent=AGENT, input=run_input)["id"])
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
    assert_every_effect_has_its_own_approval()
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


# --- kills + downstream timeouts + cancels + forks ----------------------------------------------

FAULT_SEED = 20_261_130
FAULT_START_EVERY_S = 1.0
FAULT_TIME_LIMIT_S = 150
# A faulted call hangs past the tool timeout; TOOL_MAX_RETRIES=1 makes "times=1" a timeout the
# ledger retries inside the call, and "times=2" one that leaves the effect in doubt for the
# run's retry (or the cancel's compensation) to settle by asking the downstream by key.
HANG_S, TOOL_TIMEOUT_S = 3.0, 2.0


@pytest.fixture
def tina(db):
    """A reviewer who may also travel in time: she forks runs from the run page."""
    return person("tina", perms=[DECIDE, "agents.time_travel"])


def test_runs_end_with_each_effect_once_and_approved_under_kills_timeouts_cancels_and_forks(
    processes, api_client_for, page_client_for, alice, bob, carol, tina, frank
):
    rng = random.Random(FAULT_SEED)
    plan = fault_plan(rng)
    kills = sorted(rng.uniform(3.0, len(plan) * FAULT_START_EVERY_S + 15.0) for _ in range(4))
    seeded_deploys = deploys_seed(p.service for p in plan if p.action == ROLLBACK)
    faults_dir = processes.log_dir / "faults"
    fault_env = faulty_worker_env(
        directory=faults_dir,
        faults=[f for p in plan for f in p.faults],
        hang_s=HANG_S,
        tool_timeout_s=TOOL_TIMEOUT_S,
    )
    processes.web()
    worker = processes.worker(sandbox_delay_s=0.5, env={**fault_env, "TOOL_MAX_RETRIES": "1"})
    chaos = FaultChaos(
        plan=plan,
        processes=processes,
        # frank (compliance) reads every run, the forks of tina included.
        apis={user.username: api_client_for(user) for user in (alice, bob, carol, frank)},
        pages={user.username: page_client_for(user) for user in (carol, tina)},
    )

    began = time.monotonic()
    kills_done = 0
    killed_at: list[dt.datetime] = []  # when each kill landed (the effects' clock)
    while True:
        elapsed = time.monotonic() - began
        chaos.start_due(elapsed=elapsed, every_s=FAULT_START_EVERY_S)
        if kills_done < len(kills) and elapsed >= kills[kills_done]:
            worker.kill()
            killed_at.append(timezone.now())
            time.sleep(rng.uniform(0.2, 2.0))
            worker.start()
            kills_done += 1
        chaos.step()
        if kills_done == len(kills) and chaos.finished():
            break
        if elapsed > FAULT_TIME_LIMIT_S:
            pytest.fail(f"not over after {FAULT_TIME_LIMIT_S}s:\n{chaos.report()}")
        time.sleep(0.5)

    # Every run ended as planned; none is left running, waiting, queued or flagged.
    assert {str(pk) for pk in AgentRun.objects.values_list("pk", flat=True)} == set(chaos.runs)
    assert runs_not_ended() == [] and effects_unsettled() == []
    injected, acted = faults_injected(faults_dir), faults_acted(faults_dir)
    for run_id, planned in chaos.runs.items():
        view = run_get(chaos.apis["frank"], run_id)
        assert_run_ended_as_planned(planned, view, acted=acted, injected=injected)
    for run in AgentRun.objects.all():
        assert run_interrupts_without_approval(run=run) == [], run.pk
    # No duplicate downstream row, and no effect without its own run's approval.
    assert_one_downstream_row_per_effect()
    assert_every_effect_has_its_own_approval()
    applied = Effect.objects.filter(status__in=APPLIED, tool__in=(ROLLBACK, ROLL_FORWARD))
    assert SandboxDeploy.objects.count() == seeded_deploys + applied.count()
    # Each fork from after the gate was refused (no run); each from before it asked again, was
    # decided, and acted under its own approval, not its parent's.
    assert len(chaos.forked) == Counter(p.role for p in plan)["fork"]
    for parent_id, child_id in chaos.forked.items():
        children = AgentRun.objects.filter(parent_run_id=parent_id).values_list("pk", flat=True)
        assert [str(pk) for pk in children] == [child_id]
        [parent_action] = Effect.objects.filter(run_id=parent_id, tool=TICKET)
        [child_action] = Effect.objects.filter(run_id=child_id, tool=TICKET)
        assert child_action.approval_id == chaos.reasked[child_id] != parent_action.approval_id
    # Every planned fault was injected (a kill mid-hang may spare the second of two), and
    # some effect went in doubt and was settled by asking the downstream, which had acted.
    for planned in chaos.runs.values():
        for f in planned.faults:
            [effect] = Effect.objects.filter(run_id=planned.run_id, tool=f["tool"])
            # A cancelled run's call a kill cut before its fault (while the effect was claimed)
            # reached nothing downstream; without such a kill every fault was injected.
            cut = call_cut_by_kill(planned, effect, killed_at=killed_at)
            assert int(not cut) <= len(injected.get(effect.key, [])) <= f["times"], (f, injected)
            assert set(injected.get(effect.key, [f["kind"]])) == {f["kind"]}, (f, injected)
    assert AuditEvent.objects.filter(action="effect.in_doubt").exists()
    reconciled = AuditEvent.objects.filter(action="effect.reconciled")
    assert any(event.data["downstream_acted"] for event in reconciled)
    assert time.monotonic() - began < FAULT_TIME_LIMIT_S
