"""Edges of the run lifecycle: a call deferred by the deadline, the failure budget beside
replayed writes, flagged runs, settle rules, undos of cancelled runs, the lease epoch against
the checkpoints, cut-off connections, and the step budget of parallel approvals."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph

from agents.effects import ledger
from agents.effects.errors import ToolTimeout
from agents.effects.ledger import effect_execute
from agents.effects.reconcile import effects_reconcile
from agents.models import Effect
from agents.runtime import advance, recovery
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import SettleRefused, effect_settle, run_cancel, run_start
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun
from audit.canonical import payload_hash
from audit.models import AuditEvent
from tests.support.factories import RunFactory
from tests.support.pay_agents import (
    ADVANCE_TASK,
    PayState,
    advances_drain,
    die_mid_step,
    escalated_effect,
    pay_agent_register,
)
from tests.support.people import DECIDE, person
from tests.support.providers import PayArgs
from tests.support.queue import tasks_named

pytestmark = pytest.mark.django_db(transaction=True)


# --- helpers --------------------------------------------------------------------------------------


def _stale(run: AgentRun) -> None:
    """Time passes: the run's row is older than the sweep's orphan threshold (Q_RETRY)."""
    AgentRun.objects.filter(pk=run.pk).update(
        updated_at=timezone.now() - dt.timedelta(seconds=django_settings.Q_RETRY + 5)
    )


class Killed(BaseException):
    """What django-q2's task timeout raises inside the task (a SystemExit subclass)."""


def _graph(nodes: dict[str, Any], edges: list[tuple[str, str]]) -> Any:
    def build(*, checkpointer: Any = None) -> Any:
        builder = StateGraph(PayState)
        for name, fn in nodes.items():
            builder.add_node(name, fn)
        for a, b in edges:
            builder.add_edge(START if a == "START" else a, END if b == "END" else b)
        return builder.compile(checkpointer=checkpointer)

    return build


# --- a call deferred by the deadline is deferred once ---------------------------------------------


def test_a_call_after_slow_work_in_its_node_is_deferred_once_then_made(settings, alice, queued):
    """guarantees.md: a call that could not have its full timeout before the deadline "is not
    started ... the run continues in a new task where it has that time". The node does some
    work first (a model call, a slow read: here 75 % of the advance) and then pays. In the new
    task the node re-runs from its top, the work takes the same time, and the call again
    cannot have its timeout: AdvanceDeadline -> "continuing" -> again, forever. No step is done
    (the node never finishes), no failure is counted, the step budget never moves.

    With the defaults (Q_TIMEOUT 45 -> deadline 27 s, TOOL_TIMEOUT 30 s -> needed 13.5 s) any node
    whose work before its call takes more than 13.5 s never runs its call."""
    settings.RUN_ADVANCE_DEADLINE_SECONDS = 1.0
    settings.TOOL_TIMEOUT_SECONDS = 0.3  # needed = min(0.3, 0.5) = 0.3 s
    settings.TOOL_MAX_RETRIES = 0
    settings.RUN_MAX_FAILURES = 2
    calls: list[int] = []

    def pay(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        calls.append(args["amount"])
        return {"paid": args["amount"]}

    tool_register(
        ToolSpec(name="dl_pay", description="p", args_model=PayArgs, tier="write", run=pay)
    )

    def think_then_pay(state: PayState) -> dict[str, Any]:
        time.sleep(0.75)  # the model thinks (0.75 of the advance), then the node acts
        thread_id = get_config()["configurable"]["thread_id"]
        return {
            "paid": effect_execute(
                run_id=thread_id, key=f"{thread_id}:pay", tool="dl_pay", args={"amount": 5}
            )
        }

    agent_register(
        AgentSpec(
            name="dl_agent",
            version="1",
            factory=_graph({"act": think_then_pay}, [("START", "act"), ("act", "END")]),
        )
    )
    try:
        run = run_start(agent="dl_agent", input={"amount": 5}, user=alice)
        queued.reset_mock()
        outcomes = [advance.run_advance(run_id=run.id)]
        for _ in range(4):  # each advance re-enqueued itself
            pending = tasks_named(queued, ADVANCE_TASK)
            queued.reset_mock()
            if not pending:
                break
            outcomes.append(advance.run_advance(run_id=run.id))
    finally:
        agent_unregister("dl_agent")
        tool_unregister("dl_pay")
    run.refresh_from_db()
    continued = AuditEvent.objects.filter(action="run.continued", run_id=run.id).count()
    # Round and round without its call, a failure or an end is a loop without end.
    assert calls or run.failure_count or run.is_terminal or run.flag, (
        f"5 advances, {continued} 'run.continued', 0 calls, failure_count 0, status "
        f"{run.status}, steps_used {run.steps_used}: {outcomes}"
    )


# --- a replayed (cached) write of a sibling is no progress ----------------------------------------


def _fan_out_agent(name: str, broken: Any) -> AgentSpec:
    def fine(state: PayState) -> dict[str, Any]:
        return {"amount": 1}

    return agent_register(
        AgentSpec(
            name=name,
            version="1",
            factory=_graph(
                {"fine": fine, "broken": broken},
                [("START", "fine"), ("START", "broken"), ("fine", "END"), ("broken", "END")],
            ),
        )
    )


def test_a_branch_that_fails_every_time_beside_one_that_succeeded_ends_dead(
    settings, alice, queued
):
    """guarantees.md: "a step done resets it ... while a step that fails every time still ends
    it". Two branches run in one superstep: "fine" succeeds (its write is saved as a pending
    write), "broken" gets a 503 every time. On every retry LangGraph re-emits fine's saved
    write as an update (cached); budget_spend counts it as steps done (two: the node and the
    "__metadata__" key) and run_budget_add resets failure_count to 0. The run never reaches
    RUN_MAX_FAILURES; it burns the step budget instead and ends "failed: step budget" after
    ~RUN_MAX_STEPS/2 attempts, not dead after RUN_MAX_FAILURES."""
    settings.RUN_MAX_FAILURES = 3

    def broken(state: PayState) -> dict[str, Any]:
        time.sleep(0.2)  # fine finishes first
        raise ConnectionError("503 from the provider, every time")

    _fan_out_agent("fan_agent", broken)
    try:
        run = run_start(agent="fan_agent", input={"amount": 1}, user=alice)
        outcomes = []
        counts = []
        for _ in range(6):
            outcomes.append(advance.run_advance(run_id=run.id))
            run.refresh_from_db()
            counts.append((run.failure_count, run.steps_used))
            if run.is_terminal:
                break
    finally:
        agent_unregister("fan_agent")
    assert run.status == AgentRun.Status.DEAD, (
        f"(failure_count, steps_used) after each advance: {counts}; {outcomes}"
    )


def test_a_branch_killed_every_time_beside_one_that_succeeded_ends_dead(settings, alice):
    """The same with a branch that outlasts the task timeout (killed every time): each
    redelivery counts the death (run.recovered, failure_count+1), then the cached write of the
    sibling resets the count to 0. guarantees.md: "An advance that died mid-step ... counts
    toward RUN_MAX_FAILURES; past it the run is dead and escalated"."""
    settings.RUN_MAX_FAILURES = 3

    def broken(state: PayState) -> dict[str, Any]:
        time.sleep(0.2)
        raise Killed()

    _fan_out_agent("fan_kill_agent", broken)
    try:
        run = run_start(agent="fan_kill_agent", input={"amount": 1}, user=alice)
        outcomes, counts = [], []
        for _ in range(6):
            try:
                outcomes.append(advance.run_advance(run_id=run.id))
            except Killed:
                outcomes.append("killed")
            run.refresh_from_db()
            counts.append((run.failure_count, run.steps_used))
            if run.is_terminal:
                break
            die_mid_step(run)
    finally:
        agent_unregister("fan_kill_agent")
    recovered = AuditEvent.objects.filter(action="run.recovered", run_id=run.id).count()
    assert run.status == AgentRun.Status.DEAD, (
        f"{recovered} deaths recorded; (failure_count, steps_used): {counts}; {outcomes}"
    )


# --- a flagged run waits and is not swept ---------------------------------------------------------


def test_a_run_flagged_after_its_worker_died_waits_and_is_not_swept(alice, queued):
    """The worker died mid-step (status running); before the run is recovered a deploy removes
    its agent. The next advance counts the death, then flags the run ("unknown agent") keeping
    status RUNNING (run_flag keeps the status unless told). Since the flag check now comes
    before the recovery count, every sweep takes it for a dead worker again (running, no
    lease, older than Q_RETRY), re-enqueues it, and the advance returns "flagged" without
    counting: a loop without end, and the run shows "running" forever although it waits for a
    person (guarantees.md: a run flagged for a person waits, status waiting, and the sweep does
    not take it for a dead worker)."""
    agent_register(
        AgentSpec(
            name="gone_agent",
            version="1",
            factory=_graph({"one": lambda s: {}}, [("START", "one"), ("one", "END")]),
        )
    )
    run = run_start(agent="gone_agent", input={"amount": 1}, user=alice)
    die_mid_step(run)
    agent_unregister("gone_agent")  # a deploy removed it
    first = advance.run_advance(run_id=run.id)
    assert first == "flagged: unknown agent", first
    swept = 0
    outcomes = []
    for _ in range(3):  # three sweeps, a minute apart; nobody looked yet
        _stale(run)
        queued.reset_mock()
        recovery.runs_recover()
        pending = tasks_named(queued, ADVANCE_TASK)
        swept += len(pending)
        for _name, run_id, *_rest in pending:
            outcomes.append(advance.run_advance(run_id=run_id))
    run.refresh_from_db()
    assert (run.status, swept) != (AgentRun.Status.RUNNING, 3) and swept == 0, (
        f"status {run.status}, flag {run.flag!r}, re-enqueued by {swept} of 3 sweeps: {outcomes}"
    )


# --- settle rules ---------------------------------------------------------------------------------


def _tiers_split():
    """The demo policy, with "critical" decided only by approvers-critical (a deployment that
    keeps write approvers out of critical actions)."""
    from django.contrib.auth.models import Group

    from approvals.models import RiskTier
    from approvals.services import policy_seed_demo

    policy_seed_demo()
    critical = RiskTier.objects.get(name="critical")
    critical.approver_groups.set([Group.objects.get(name="approvers-critical")])
    return critical


def test_settle_follows_the_tool_policy_tier_not_the_tools_code_default(alice, queued):
    """An effect without an approval takes its tier from ``spec.tier`` (agents/services.py
    _tool_tier), ignoring the ToolPolicy an administrator set in the admin ("a ToolPolicy in
    the admin overrides it", invariant 7). The tool's code says "write", the policy says
    "critical": a write approver may answer "call it again" for a critical action."""
    from approvals.models import RiskTier, ToolPolicy

    critical = _tiers_split()
    ToolPolicy.objects.create(tool="wire_out", tier=critical)
    tool_register(
        ToolSpec(
            name="wire_out",
            description="w",
            args_model=PayArgs,
            tier="write",
            run=lambda a, k: {},
            takes_key=False,
        )
    )
    wendy = person("wendy", groups=["approvers-write"], perms=[DECIDE])
    assert RiskTier.objects.filter(name="critical").exists()
    try:
        run = RunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
        effect = escalated_effect(run, tool="wire_out", args={"amount": 900_000})
        with pytest.raises(SettleRefused):
            effect_settle(effect=effect, outcome="retry", user=wendy)
    finally:
        tool_unregister("wire_out")


def test_settling_a_tool_this_process_does_not_know_takes_the_critical_tier(alice, queued):
    """A tool absent from this process's registry (registered at graph build by a
    middleware/agent that the web process never built, or removed by a deploy) gives tier
    None, and _settle_check falls back to the bare approvals.decide permission, so anyone with
    it settles a critical action (the ToolPolicy says critical). approvals.policy treats an
    unknown tier as the riskiest (UNKNOWN_TIER = "critical"); settle does the opposite."""
    from approvals.models import ToolPolicy

    critical = _tiers_split()
    ToolPolicy.objects.create(tool="drop_database", tier=critical)
    eve = person("eve", perms=[DECIDE])  # a reviewer in no approver group
    run = RunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
    effect = escalated_effect(run, tool="drop_database", args={"amount": 1})
    with pytest.raises(SettleRefused):
        effect_settle(effect=effect, outcome="retry", user=eve)


def test_settling_a_critical_effect_needs_the_tiers_required_group(alice, queued):
    """Demo policy: a critical action needs two approvals, one from approvers-critical. Bob
    (approvers-write) alone may not approve a rollback, yet user_may_approve_tier says yes
    (approvers-write is among critical's approver groups) and he alone answers "call it again"
    for an escalated rollback: one more call of a critical action on one write approver's word
    (quorum and required_group are not applied to a settle)."""
    from approvals.services import policy_seed_demo

    policy_seed_demo()
    bob2 = person("bob2", groups=["approvers-write"], perms=[DECIDE])
    run = RunFactory(requested_by=alice, status=AgentRun.Status.WAITING, agent="incident_copilot")
    effect = escalated_effect(
        run, tool="rollback_deploy", args={"service": "checkout", "to_version": "v41"}
    )
    with pytest.raises(SettleRefused):
        effect_settle(effect=effect, outcome="retry", user=bob2)


# --- cancelled runs: undos are owed until done ----------------------------------------------------


def _pay_pair(undo: Any, *, undo_lookup: Any = None, pay_tool: str = "cpay") -> dict[str, int]:
    paid: dict[str, int] = {}

    def pay(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        paid[key] = args["amount"]
        return {"paid": args["amount"]}

    tool_register(
        ToolSpec(
            name=pay_tool,
            description="pay",
            args_model=PayArgs,
            tier="write",
            run=pay,
            lookup=lambda key: {"paid": paid[key]} if key in paid else None,
            compensate_with=f"{pay_tool}_undo",
        )
    )
    tool_register(
        ToolSpec(
            name=f"{pay_tool}_undo",
            description="undo",
            args_model=PayArgs,
            tier="write",
            run=undo,
            lookup=undo_lookup,
            takes_key=undo_lookup is not None,
        )
    )
    return paid


def test_an_escalated_undo_of_a_cancelled_run_can_be_called_again(
    settings, monkeypatch, alice, bob, queued
):
    """The run paid, then was cancelled; the undo (a keyless refund API) timed out, so it is in
    doubt and escalated. The reviewer checks the bank: the refund never arrived, so they answer
    "call it again". _settle_check refuses every "retry" of a cancelled run ("no effect of it
    is called again"), the compensation included, so the money can never be given back: "it
    did not happen" leaves the payment applied and nothing ever compensates it again."""
    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    undone: list[str] = []
    script = ["timeout"]

    def undo(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        if script and script.pop(0) == "timeout":
            raise ToolTimeout("the refund API did not answer")
        undone.append(key or "keyless")
        return {"reversed": args["amount"]}

    _pay_pair(undo)
    try:
        run = RunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
        effect_execute(run_id=str(run.id), key=f"{run.id}:pay", tool="cpay", args={"amount": 40})
        run_cancel(run=run, user=alice)
        advances_drain(queued)  # compensates: the undo times out (in doubt)
        effects_reconcile()  # no lookup: escalated to a person
        comp = Effect.objects.get(key=f"{run.id}:pay:compensate")
        assert comp.status == Effect.Status.IN_DOUBT and comp.escalated_at is not None
        refused = ""
        try:
            effect_settle(effect=comp, outcome="retry", user=bob, note="no refund at the bank")
        except SettleRefused as exc:
            refused = exc.message
        advances_drain(queued)
    finally:
        tool_unregister("cpay")
        tool_unregister("cpay_undo")
    original = Effect.objects.get(key=f"{run.id}:pay")
    assert original.status == Effect.Status.COMPENSATED and undone, (
        f"retry refused: {refused!r}; payment {original.status}, undo calls {undone}"
    )


def test_an_undo_that_timed_out_and_was_found_not_done_is_tried_again(
    settings, monkeypatch, alice, queued
):
    """The undo (keyed, with a lookup) times out once; the sweep later finds it "never acted"
    (quiet period over) and settles it failed. Only a *found* effect wakes a cancelled run
    (reconcile._compensate_if_cancelled); nothing retries the undo, so the payment of a
    cancelled run stays applied forever (the run is terminal, the sweep never looks at it)."""
    settings.TOOL_MAX_RETRIES = 0
    settings.EFFECT_SETTLE_AFTER_SECONDS = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    undone: dict[str, int] = {}
    script = ["timeout"]

    def undo(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        if script and script.pop(0) == "timeout":
            raise ToolTimeout("the refund API did not answer")  # and it did not act
        undone[key] = args["amount"]
        return {"reversed": args["amount"]}

    _pay_pair(
        undo,
        undo_lookup=lambda key: {"reversed": undone[key]} if key in undone else None,
        pay_tool="dpay",
    )
    try:
        run = RunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
        effect_execute(run_id=str(run.id), key=f"{run.id}:pay", tool="dpay", args={"amount": 40})
        run_cancel(run=run, user=alice)
        advances_drain(queued)
        for _ in range(3):  # sweeps
            effects_reconcile()
            _stale(run)
            recovery.runs_recover()
            advances_drain(queued)
    finally:
        tool_unregister("dpay")
        tool_unregister("dpay_undo")
    original = Effect.objects.get(key=f"{run.id}:pay")
    comp = Effect.objects.get(key=f"{run.id}:pay:compensate")
    assert original.status == Effect.Status.COMPENSATED, (
        f"payment {original.status}, undo {comp.status} ({comp.error!r}), undo calls {undone}"
    )


# --- a run waiting for a person goes on when the sweep settles its effect -------------------------


def test_a_run_waiting_for_a_person_goes_on_when_the_sweep_settles_its_effect(
    settings, monkeypatch, alice, bob, queued
):
    """A keyless payment API that can be asked by key (lookup) but not deduped: the call times
    out; the replay asks, finds nothing yet (a call may still land) and, since it cannot call
    again, escalates it and flags the run (status waiting). Then the answer lands and the
    sweep's lookup finds it: the effect is settled as succeeded. Nobody unflags the run: only
    effect_settle does, and it now refuses ("succeeded and waits for nobody"), the sweep never
    takes a waiting run, and there is no unflag page. The run waits forever."""
    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    landed: dict[str, dict[str, int]] = {}
    script = ["timeout"]

    def pay(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        if script and script.pop(0) == "timeout":
            raise ToolTimeout("no answer yet")  # the request is still in flight
        return {"paid": args["amount"]}

    tool_register(
        ToolSpec(
            name="kl_pay",
            description="p",
            args_model=PayArgs,
            tier="write",
            run=pay,
            lookup=lambda key: landed.get(key),
            takes_key=False,
        )
    )
    spec = pay_agent_register("kl_pay")
    try:
        run = run_start(agent=spec.name, input={"amount": 70}, user=alice)
        first = advance.run_advance(run_id=run.id)
        assert first.startswith("retrying"), first
        second = advance.run_advance(run_id=run.id)
        assert second == "flagged: effect in doubt", second
        landed[f"{run.thread_id}:pay"] = {"paid": 70}  # the call landed after all
        effects_reconcile()  # the sweep finds it
        effect = Effect.objects.get(run=run)
        assert effect.status == Effect.Status.SUCCEEDED
        settle_error = ""
        try:
            effect_settle(effect=effect, outcome="done", user=bob)
        except SettleRefused as exc:
            settle_error = exc.message
        outcomes = []
        for _ in range(3):
            _stale(run)
            recovery.runs_recover()
            outcomes += advances_drain(queued)
    finally:
        agent_unregister(spec.name)
        tool_unregister("kl_pay")
    run.refresh_from_db()
    assert run.status == AgentRun.Status.COMPLETED, (
        f"status {run.status}, flag {run.flag!r}; settle: {settle_error!r}; sweeps: {outcomes}"
    )


# --- a cancel that lands while the worker handles EffectInDoubt -----------------------------------


def test_a_cancel_during_the_in_doubt_replay_compensates_instead_of_crashing(
    settings, monkeypatch, alice
):
    """The replay asks the keyless downstream by key; meanwhile the user cancels. The lookup
    finds nothing yet -> EffectInDoubt -> the handler flags the run WAITING, which _run_transition
    refuses for a cancelled run with RunStopped, raised inside the ``except EffectInDoubt``
    handler where nothing catches it: the task crashes (run_advance raises)."""
    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    state: dict[str, Any] = {}

    def pay(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        raise ToolTimeout("no answer")

    def lookup(key: str) -> None:
        if "run" in state:
            run_cancel(run=AgentRun.objects.get(pk=state["run"]), user=alice)
        return None

    tool_register(
        ToolSpec(
            name="kc_pay",
            description="p",
            args_model=PayArgs,
            tier="write",
            run=pay,
            lookup=lookup,
            takes_key=False,
        )
    )
    spec = pay_agent_register("kc_pay")
    from tests.support.queue import queue_recorded

    try:
        with queue_recorded():
            run = run_start(agent=spec.name, input={"amount": 70}, user=alice)
            assert advance.run_advance(run_id=run.id).startswith("retrying")
            state["run"] = run.pk
            try:
                outcome = advance.run_advance(run_id=run.id)
            except Exception as exc:  # noqa: BLE001
                outcome = f"raised {type(exc).__name__}: {exc}"
    finally:
        agent_unregister(spec.name)
        tool_unregister("kc_pay")
    assert not outcome.startswith("raised"), outcome


# --- the lease epoch lives in another database than the checkpoints -------------------------------


def test_a_lease_epoch_lower_than_the_checkpoints_is_raised_above_them(settings, alice, queued):
    """The epoch is a column of AgentRun (Django's database); the checkpoints record it in
    their metadata (the checkpointer's: on SQLite another file). Anything that lowers the
    column below what the checkpoints hold (a release rolled back with its migration and
    re-applied: approvals 0010 drops and re-adds lease_epoch at 0; the Django database restored
    from a backup older than the checkpoint file) makes every later checkpoint lose to the old
    head. Here the run does steps 4-6 after such a reset: it "completes" with the output of
    step 4 (the old head plus the pending write on it), and its history ends at step 3."""
    from agents.selectors import run_history

    settings.RUN_ADVANCE_DEADLINE_SECONDS = 0  # one step per advance (each under a new epoch)
    names = ["one", "two", "three", "four", "five", "six"]

    def step(n: int) -> Any:
        return lambda state: {"amount": n}

    edges = [("START", "one"), *zip(names, names[1:], strict=False), ("six", "END")]
    agent_register(
        AgentSpec(
            name="epoch_agent",
            version="1",
            factory=_graph({n: step(i + 1) for i, n in enumerate(names)}, list(edges)),
        )
    )
    try:
        run = run_start(agent="epoch_agent", input={"amount": 0}, user=alice)
        outcomes = [advance.run_advance(run_id=run.id) for _ in range(3)]  # epochs 1..3
        AgentRun.objects.filter(pk=run.pk).update(lease_epoch=0)  # migrate approvals 0009; migrate
        settings.RUN_ADVANCE_DEADLINE_SECONDS = 30
        outcomes += [advance.run_advance(run_id=run.id) for _ in range(2)]
        run.refresh_from_db()
        shown = [s["values"].get("amount") for s in run_history(run=run)]
    finally:
        agent_unregister("epoch_agent")
    completed = AuditEvent.objects.get(action="run.completed", run_id=run.id)
    assert (run.output.get("amount"), shown[-1]) == (6, 6), (
        f"output {run.output} (audited: {completed.data['output']}), history amounts {shown}; "
        f"{outcomes}"
    )


# --- a connection dropped after the request was sent is in doubt ----------------------------------


def test_a_payment_whose_connection_dropped_after_it_acted_is_undone_on_cancel(
    settings, monkeypatch, alice, queued
):
    """agents/effects/errors.py now classifies httpx.RemoteProtocolError ("server disconnected
    without sending a response") and urllib3's ProtocolError (requests' "Connection aborted",
    RemoteDisconnected) as transient: on the last attempt a keyed call becomes FAILED
    (ledger._fail), the status that means "it never acted". But these errors happen after the
    request was sent: the downstream may well have acted (invariant 13: unknown is a state).
    The user cancels before the retry: compensation only reconciles claimed/in-doubt effects
    and only undoes succeeded ones, so the money that moved is never looked up nor given back."""
    import httpx

    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    records: dict[str, int] = {}
    undone: list[str] = []

    def pay(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        records[key] = args["amount"]  # the provider charged the card...
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    tool_register(
        ToolSpec(
            name="hx_pay",
            description="p",
            args_model=PayArgs,
            tier="write",
            run=pay,
            lookup=lambda key: {"paid": records[key]} if key in records else None,
            compensate_with="hx_pay_undo",
        )
    )
    tool_register(
        ToolSpec(
            name="hx_pay_undo",
            description="u",
            args_model=PayArgs,
            tier="write",
            run=lambda args, key: undone.append(key) or {"reversed": args["amount"]},
            lookup=lambda key: None,
        )
    )
    spec = pay_agent_register("hx_pay")
    try:
        run = run_start(agent=spec.name, input={"amount": 70}, user=alice)
        first = advance.run_advance(run_id=run.id)
        assert first.startswith("retrying"), first
        run_cancel(run=AgentRun.objects.get(pk=run.pk), user=alice)
        outcomes = advances_drain(queued)
        effects_reconcile()
        outcomes += advances_drain(queued)
    finally:
        agent_unregister(spec.name)
        tool_unregister("hx_pay")
        tool_unregister("hx_pay_undo")
    effect = Effect.objects.get(key=f"{run.thread_id}:pay")
    assert undone or effect.status in ("claimed", "in_doubt"), (
        f"charged {records}, effect {effect.status} ({effect.error!r}), undo calls {undone}: "
        f"{outcomes}"
    )


# --- replayed (cached) writes are not counted as steps again --------------------------------------


def test_parallel_approvals_answered_one_by_one_cost_each_step_once(alice, bob):
    """Eight Send branches each wait for a person (tests/support/agents.build_fan_graph); the
    reviewer answers one at a time. Each advance resumes one branch; LangGraph re-emits the
    saved writes of the branches already done as "updates" (cached), and budget_spend counts
    each as two steps (the node and the "__metadata__" key). Eight real steps cost
    8 + 2*(0+1+...+7) = 64 > RUN_MAX_STEPS (50): the run ends "failed: step budget exhausted"
    before its last branch, and every one of those replays also reset failure_count."""
    from approvals.services import approval_decide
    from tests.support.agents import DELETED, build_fan_graph

    paths = [f"/tmp/{i}.log" for i in range(8)]
    agent_register(AgentSpec(name="fan_budget", version="1", factory=build_fan_graph))
    outcomes = []
    try:
        run = run_start(agent="fan_budget", input={"paths": paths}, user=alice)
        outcomes.append(advance.run_advance(run_id=run.id))
        for approval in run.approvals.order_by("id"):
            approval.refresh_from_db()
            approval_decide(
                approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
            )
            outcomes.append(advance.run_advance(run_id=run.id))
    finally:
        agent_unregister("fan_budget")
        DELETED.clear()
    run.refresh_from_db()
    assert run.status == AgentRun.Status.COMPLETED, (
        f"steps_used {run.steps_used} for 8 branches; {run.status}: {run.error[:80]!r}; "
        f"{outcomes[-3:]}"
    )


# ==================================================================================================
# Attacks tried that did NOT work (these pass on the code under review; kept as regressions).
# ==================================================================================================


def _gated_pay_graph(*, subgraph: bool) -> Any:
    """gate (write_note, tier write) then the approved call through the ledger; optionally the
    two nodes inside a subgraph (their checkpoints live in the subgraph's namespace)."""
    from agents.hitl.gate import approval_gate
    from tests.support.agents import NoteState

    def ask(state: NoteState) -> dict[str, Any]:
        decision = approval_gate(
            tool="write_note", args={"text": "hi", "count": 1}, rationale="r", evidence=[]
        )
        return {"decision": decision}

    def act(state: NoteState) -> dict[str, Any]:
        decision = state["decision"]
        thread_id = str(get_config()["configurable"]["thread_id"])
        effect_execute(
            run_id=thread_id,
            key=f"{thread_id}:note",
            tool="write_note",
            args=decision["args"],
            approval_id=decision["approval_id"],
        )
        return {"log": ["executed"]}

    def inner_build() -> Any:
        builder = StateGraph(NoteState)
        builder.add_node("ask", ask)
        builder.add_node("act", act)
        builder.add_edge(START, "ask")
        builder.add_edge("ask", "act")
        builder.add_edge("act", END)
        return builder

    def build(*, checkpointer: Any = None) -> Any:
        if not subgraph:
            return inner_build().compile(checkpointer=checkpointer)
        outer = StateGraph(NoteState)
        outer.add_node("inner", inner_build().compile())
        outer.add_edge(START, "inner")
        outer.add_edge("inner", END)
        return outer.compile(checkpointer=checkpointer)

    return build


def test_a_gate_and_its_effect_inside_a_subgraph_resume_once(note_agent, alice, bob):
    from tests.support import agents as note_module
    from tests.support.approvals import decide

    agent_register(
        AgentSpec(name="sub_agent", version="1", factory=_gated_pay_graph(subgraph=True))
    )
    try:
        run = run_start(agent="sub_agent", input={"topic": "x"}, user=alice)
        assert advance.run_advance(run_id=run.id) == "waiting"
        assert advance.run_advance(run_id=run.id) == "waiting"  # a redelivery: a new epoch
        decide(run.approvals.get(), bob)
        assert advance.run_advance(run_id=run.id) == "completed"
        assert advance.run_advance(run_id=run.id) == "nothing to do: completed"
    finally:
        agent_unregister("sub_agent")
    assert len(note_module.CALLS) == 1


def test_a_thread_written_before_the_migration_resumes_and_forks(
    note_agent, alice, bob, monkeypatch
):
    """Checkpoints without lease_epoch (written before 0010) and a run at lease_epoch 0."""
    from agents.runtime.checkpoint import checkpointer_get, thread_config
    from agents.selectors import run_history
    from agents.services import run_fork
    from tests.support import agents as note_module
    from tests.support.approvals import decide

    monkeypatch.setattr(advance, "EPOCH", "not_the_epoch")  # the old code wrote no epoch
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    monkeypatch.undo()
    assert "lease_epoch" not in checkpointer_get().get_tuple(thread_config(run)).metadata
    AgentRun.objects.filter(pk=run.pk).update(lease_epoch=0)  # the new column's default
    waited = [s for s in run_history(run=run) if s["interrupt_ids"]][-1]
    decide(run.approvals.get(), bob)
    assert advance.run_advance(run_id=run.id) == "completed"
    assert len(note_module.CALLS) == 1
    child = run_fork(run=run, checkpoint_id=waited["checkpoint_id"], user=bob)
    assert advance.run_advance(run_id=child.id) == "waiting"  # the fork asks again


def test_the_deadline_deferral_claims_nothing_and_the_approval_still_fits(
    note_agent, alice, bob, monkeypatch
):
    from tests.support import agents as note_module
    from tests.support.approvals import decide

    agent_register(
        AgentSpec(name="defer_agent", version="1", factory=_gated_pay_graph(subgraph=False))
    )
    short = iter([True])
    monkeypatch.setattr(ledger, "short_of_time", lambda: next(short, False))
    try:
        run = run_start(agent="defer_agent", input={"topic": "x"}, user=alice)
        assert advance.run_advance(run_id=run.id) == "waiting"
        approval = run.approvals.get()
        decide(approval, bob)
        assert advance.run_advance(run_id=run.id) == "continuing: advance deadline reached"
        assert not Effect.objects.filter(run=run).exists()
        approval.refresh_from_db()
        assert approval.spent_key == f"{run.thread_id}:note"  # bound, to the same key
        assert advance.run_advance(run_id=run.id) == "completed"
    finally:
        agent_unregister("defer_agent")
    assert len(note_module.CALLS) == 1
    run.refresh_from_db()
    assert run.failure_count == 0


def test_a_cancelled_run_whose_effect_is_found_during_compensation_does_not_loop(
    settings, alice, queued
):
    undone: list[str] = []
    paid = _pay_pair(lambda args, key: undone.append(key) or {"reversed": 1}, pay_tool="fpay")
    try:
        run = RunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
        key = f"{run.id}:pay"
        Effect.objects.create(
            key=key,
            run=run,
            tool="fpay",
            args={"amount": 3},
            args_fingerprint=payload_hash({"amount": 3}),
            status=Effect.Status.IN_DOUBT,
        )
        paid[key] = 3  # it landed
        run_cancel(run=run, user=alice)
        rounds = 0
        while tasks_named(queued, ADVANCE_TASK) and rounds < 10:
            rounds += 1
            pending = tasks_named(queued, ADVANCE_TASK)
            queued.reset_mock()
            for _n, run_id, *_r in pending:
                advance.run_advance(run_id=run_id)
    finally:
        tool_unregister("fpay")
        tool_unregister("fpay_undo")
    assert rounds < 10
    assert Effect.objects.get(key=key).status == Effect.Status.COMPENSATED
    assert len(undone) == 1
