"""The run lifecycle as a hypothesis state machine, in-process: incident_copilot runs started,
advanced and redelivered, decided by people who may and may not, expired, cancelled, forked,
killed mid-call or timed out, and swept, in any order, hold DESIGN.md's invariants 1, 5, 6 and
10-15 after every step. Each example starts from an empty database; the profile bounds it."""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any
from unittest import mock

import pytest
import time_machine
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from hypothesis import event, stateful
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from agents import selectors, tasks
from agents import services as agent_services
from agents.effects import ledger
from agents.models import Effect, SandboxNotification, SandboxTicket
from agents.runtime.advance import run_advance
from agents.tools import tool_get
from approvals import policy
from approvals.contract import RUN_ADVANCE_TASK
from approvals.models import AgentRun, ApprovalRequest, RiskTier, ToolPolicy
from approvals.permissions import user_in_group, user_may_approve_tier
from approvals.services import approvals_sweep, policy_seed_demo
from audit.canonical import canonical_hash, payload_hash
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from core.errors import ApplicationError
from tests.audit_purge import tables_empty
from tests.support.approvals import decide
from tests.support.people import DECIDE, person
from tests.support.providers import FAULTS, WorkerKilled, faults_injected
from tests.support.queue import NOTIFICATION_MODULES, RUNNER_MODULES, queue_recorded, tasks_named

pytestmark = pytest.mark.django_db(transaction=True)

AGENT, WRITERS = "incident_copilot", "approvers-write"
TICKET, NOTIFY, CLOSE = "create_incident_ticket", "notify_channel", "close_incident_ticket"
MAX_ALIVE, MAX_RUNS = 3, 5
PEOPLE = ("bob", "carol", "dave")  # alice requests; bob, once he forked, is a requester too
KINDS = ("approve", "edit_across", "edit_within", "reject", "respond", "stale")
A_FAULT = st.sampled_from((*FAULTS, ""))  # "": none
A_RUN = st.integers(0, MAX_RUNS - 1)  # an index into the example's runs (modulo their number)
A_VOTE = st.tuples(st.sampled_from(PEOPLE), st.sampled_from(KINDS), st.integers(0, 3))
ACTED = (Effect.Status.SUCCEEDED, Effect.Status.COMPENSATED)
APPROVING = ("approve", "edit")

world: dict[str, Any] = {}  # the test's task queue and armed faults (thread id -> fault)


def _acted(effect: Effect) -> bool:
    """Whether the downstream holds what the effect asked for (asked by key, like a lookup)."""
    if effect.tool == CLOSE:
        return SandboxTicket.objects.filter(pk=effect.args["ticket_id"], status="closed").exists()
    model = SandboxTicket if effect.tool == TICKET else SandboxNotification
    return model.objects.filter(idempotency_key=effect.key).exists()


def _approval_state(pk: int) -> tuple[Any, ...]:
    a = ApprovalRequest.objects.get(pk=pk)
    votes, events = a.votes.count(), AuditEvent.objects.count()
    return (a.status, a.tier, a.args, a.payload_hash, a.quorum_round, a.decision, votes, events)


def _run_state(pk: Any) -> tuple[Any, ...]:
    r = AgentRun.objects.get(pk=pk)
    counts = (r.approvals, Effect.objects, SandboxTicket.objects, AuditEvent.objects)
    return (r.status, r.failure_count, *(rows.count() for rows in counts))


def working(step: Any) -> Any:
    """After the step, the worker (while it is up) takes the tasks the step queued."""

    @functools.wraps(step)
    def step_then_work(machine: Lifecycle, **kwargs: Any) -> None:
        event(f"rule: {step.__name__}")
        step(machine, **kwargs)
        machine.work()

    return step_then_work


class Lifecycle(stateful.RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        world["faults"].clear()
        world["queue"].reset_mock()
        self.clock = time_machine.travel(timezone.now(), tick=False)  # only the rules move it
        self.traveller = self.clock.start()
        policy_seed_demo()
        write, critical = (RiskTier.objects.get(name=name) for name in ("write", "critical"))
        # A ticket is "write"; edited to sev1 it is "critical" (two people, one senior).
        rules = ToolPolicy.objects.create(tool=TICKET, tier=write).rules
        rules.create(arg="severity", op="eq", value="sev1", tier=critical)
        self.people = {
            "alice": person("alice"),
            "bob": person("bob", perms=[DECIDE], groups=[WRITERS]),
            "carol": person("carol", perms=[DECIDE], groups=[WRITERS, "approvers-critical"]),
            "dave": person("dave"),
        }
        self.runs: list[Any] = []
        self.swept_at: dt.datetime | None = None
        self.delivered, self.worker_up, self.tiers = 0, True, {}

    def teardown(self) -> None:
        """What the example reached (hypothesis statistics), then an empty database."""
        for status in AgentRun.objects.values_list("status", flat=True):
            event(f"reached: a run {status}")
        for tool, status in Effect.objects.values_list("tool", "status").distinct():
            event(f"reached: {tool} {status}")
        self.clock.stop()
        tables_empty()

    def _needs_a_person(self, effect: Effect) -> tuple[bool, int]:
        """(needs a person, tier level) of the effect's call; the policy is fixed per example."""
        key = (effect.tool, payload_hash(effect.args))
        if key not in self.tiers:
            spec = tool_get(effect.tool)
            tier = policy.tier_for_call(tool=spec.name, args=effect.args, default_tier=spec.tier)
            self.tiers[key] = (policy.tier_requires_approval(tier), policy.tier_level(tier))
        return self.tiers[key]

    def _run(self, which: int) -> AgentRun:
        return AgentRun.objects.get(pk=self.runs[which % len(self.runs)])

    def _alive(self) -> int:
        runs = AgentRun.objects.filter(pk__in=self.runs)
        return runs.exclude(status__in=AgentRun.TERMINAL).count()

    def _pending(self) -> list[ApprovalRequest]:
        pending = ApprovalRequest.objects.filter(run_id__in=self.runs, status="pending")
        return list(pending.select_related("run").order_by("id"))

    def _advance(self, run_id: Any) -> str:
        run = AgentRun.objects.get(pk=run_id)
        held = run.lease_owner and run.lease_expires_at and run.lease_expires_at > timezone.now()
        before = _run_state(run_id)
        try:
            outcome = run_advance(run_id=run_id)
        except WorkerKilled:  # SIGKILL runs no `finally`: the lease stays until it lapses
            lapses = timezone.now() + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS)
            AgentRun.objects.filter(pk=run_id).update(lease_owner="dead", lease_expires_at=lapses)
            outcome = "killed mid-call"
        if held:  # invariant 6: a delivery while another worker holds the lease does nothing
            assert outcome.startswith("skipped") and _run_state(run_id) == before, outcome
        event(f"advance: {outcome.split(':')[0].split(' in ')[0]}")
        return outcome

    def work(self) -> None:
        """While the worker is up, it runs the advance tasks queued since it last looked."""
        for _ in range(3):
            calls = tasks_named(world["queue"], RUN_ADVANCE_TASK)
            if not self.worker_up or len(calls) == self.delivered:
                return
            fresh, self.delivered = calls[self.delivered :], len(calls)
            for run_id in dict.fromkeys(run_id for _, run_id in fresh):  # `advance` redelivers
                self._advance(run_id)

    @stateful.initialize(fault=A_FAULT, votes=st.lists(A_VOTE, max_size=3))
    def first_run(self, fault: str, votes: list[tuple[str, str, int]]) -> None:
        """Each example starts with a run at its gate, and maybe the first votes on it."""
        self.start(fault=fault)
        self.decide(votes=votes)

    @precondition(lambda self: len(self.runs) < MAX_RUNS and self._alive() < MAX_ALIVE)
    @rule(fault=A_FAULT)
    @working
    def start(self, fault: str) -> None:
        """Alice starts a run (a ticket for a sev3); ``fault`` awaits its first downstream call."""
        incident = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev3"}
        run = agent_services.run_start(agent=AGENT, input=incident, user=self.people["alice"])
        world["faults"][run.thread_id] = fault
        self.runs.append(run.pk)

    @rule(down=st.booleans())
    def worker(self, down: bool) -> None:
        """The worker stops taking tasks (they wait in the queue), or comes back."""
        self.worker_up = not down
        event(f"rule: worker {'down' if down else 'up'}")
        self.work()

    @precondition(lambda self: self.runs)
    @rule(which=A_RUN, fault=A_FAULT, twice=st.booleans())
    @working
    def advance(self, which: int, fault: str, twice: bool) -> None:
        """One more delivery of a run's advance (a redelivery, a retry, a recovery), ``fault``
        armed for its next downstream call; ``twice``: the task is delivered again at once."""
        run = self._run(which)
        world["faults"][run.thread_id] = fault
        first = self._advance(run.pk)
        if twice:
            before = _run_state(run.pk)
            second = self._advance(run.pk)
            if first in ("waiting", "completed") or first.startswith(("nothing", "cancelled")):
                assert _run_state(run.pk)[2:5] == before[2:5], (first, second)  # invariant 10

    @precondition(lambda self: self._pending())
    @rule(votes=st.lists(A_VOTE, min_size=1, max_size=3))
    @working
    def decide(self, votes: list[tuple[str, str, int]]) -> None:
        """People vote, one after the other, before the worker looks."""
        for who, kind, which in votes:
            if pending := self._pending():
                self._vote(pending[which % len(pending)], who, kind)

    def _vote(self, approval: ApprovalRequest, who: str, kind: str) -> None:
        """Approve, edit within the tier or into a higher one, reject, respond, or approve the
        proposal as it was before it changed (a stale hash); refused: nothing changes."""
        user, args = self.people[who], dict(approval.args)
        if kind == "edit_within":
            args["title"] = f"Edited: {args['title']}"[:300]
        elif kind == "edit_across":
            args["severity"] = "sev1"
        decision, extra = {
            "edit_within": ("edit", {"args": args}),
            "edit_across": ("edit", {"args": args}),
            "stale": ("approve", {"seen_hash": "0" * 64}),
            "respond": ("respond", {"message": "open it as sev2"}),
        }.get(kind, (kind, {}))
        refusal, before = self._refusal(approval, user, kind), _approval_state(approval.pk)
        try:
            decide(approval, user, decision, **extra)
        except ApplicationError as refused:
            assert refusal, f"{who} {kind} on #{approval.pk} was refused: {refused.message}"
            assert _approval_state(approval.pk) == before, "a refused vote changed something"
            return event(f"decide: refused ({refusal})")
        assert not refusal, f"{who} {kind} on #{approval.pk} was taken; expected: {refusal}"
        event(f"decide: {kind} by {who} in {approval.tier}")

    def _refusal(self, approval: ApprovalRequest, user: Any, kind: str) -> str:
        """Why DESIGN.md says the console must refuse this vote ("" when it must take it)."""
        raising = kind == "edit_across" and approval.tier == "write"
        voted = approval.votes.filter(round=approval.quorum_round, user=user).exists()
        reasons = {
            "no right to decide": not user.has_perm(DECIDE),
            "four eyes": approval.run.requested_by_id == user.pk,
            "an edit into a tier they may not approve": raising and user.username != "carol",
            "stale payload hash": kind == "stale",
            "expired": approval.expires_at <= timezone.now(),
            "voted in this round": voted,
        }
        return next((why for why, holds in reasons.items() if holds), "")

    @rule(minutes=st.sampled_from([1, 4, 16, 25]))
    @working
    def time_passes(self, minutes: int) -> None:
        """Leases lapse, approvals come due, calls in flight stop mattering."""
        self.traveller.shift(dt.timedelta(minutes=minutes))

    @rule(minutes_before=st.sampled_from([0, 1, 16]))
    @working
    def sweep(self, minutes_before: int) -> None:
        """The every-minute schedules: remind, escalate, expire; settle effects; recover runs."""
        self.traveller.shift(dt.timedelta(minutes=minutes_before))
        self.swept_at = timezone.now()
        event(f"sweep: {approvals_sweep()['expired']} expired")
        tasks.runs_recover()

    @precondition(lambda self: self._alive())
    @rule(which=A_RUN, by_reviewer=st.booleans())
    @working
    def cancel(self, which: int, by_reviewer: bool) -> None:
        run = self._run(which)
        by = self.people["bob"] if by_reviewer else run.requested_by
        agent_services.run_cancel(run=run, user=by)

    @precondition(lambda self: self.runs)
    @rule(which=A_RUN, after=st.booleans(), pick=st.integers(0, 4))
    @working
    def fork(self, which: int, after: bool, pick: int) -> None:
        """Fork from the pause or before it (a person decides again), or from after a decided
        gate: refused; forced through anyway (a stale page), the ledger must still refuse."""
        run, bob = self._run(which), self.people["bob"]
        history = selectors.run_history(run=run)
        pause = next((i for i, step in enumerate(history) if step["interrupt_ids"]), None)
        steps = [] if pause is None else history[pause + 1 :] if after else history[: pause + 1]
        if not steps:
            return event("fork: nothing to fork from")
        checkpoint = steps[pick % len(steps)]["checkpoint_id"]
        forking = functools.partial(agent_services.run_fork, run=run, checkpoint_id=checkpoint)
        if after:  # invariant 11: a fork never inherits a decided gate
            with pytest.raises(agent_services.ForkRefused):
                forking(user=bob)
        if len(self.runs) < MAX_RUNS:
            forkable = [{**step, "forkable": True} for step in history]
            with mock.patch.object(agent_services, "run_history", return_value=forkable):
                self.runs.append(forking(user=bob).pk)
        event("fork: after a decided gate: refused, then forced" if after else "fork: to the pause")

    @invariant()
    def each_act_rests_on_its_own_runs_approval_for_exactly_those_args(self) -> None:
        """Invariants 1, 5, 12: what acted (or the ledger says acted) and needs a person had an
        approval of its own run, final for exactly these args, met by its tier's quorum."""
        effects = Effect.objects.filter(compensates__isnull=True).select_related("run", "approval")
        for effect in effects:
            asks, level = self._needs_a_person(effect)
            if not asks or (effect.status not in ACTED and not _acted(effect)):
                continue
            approval = effect.approval
            assert approval is not None, f"{effect.key} acted without an approval"
            assert approval.run_id == effect.run_id, f"{effect.key} acted on another run's approval"
            assert approval.status in ("approved", "edited"), (effect.key, approval.status)
            final = approval.decision["args"]
            assert payload_hash(final) == payload_hash(effect.args), (final, effect.args)
            tier = policy.tier_get(approval.tier)
            assert level <= tier.level, f"{effect.key} ran above tier {tier.name}"
            votes = approval.votes.filter(round=approval.quorum_round, decision__in=APPROVING)
            voters = {vote.user for vote in votes if vote.args_hash == canonical_hash(final)}
            assert len(voters) >= tier.required_approvals, (effect.key, tier.name, voters)
            escalated = approval.escalated_at is not None
            for voter in voters:
                assert voter.pk != effect.run.requested_by_id, f"{voter} approved their own run"
                assert user_may_approve_tier(user=voter, tier=tier.name, escalated=escalated)[0]
            group = tier.required_group_id
            assert group is None or any(user_in_group(user=v, group_id=group) for v in voters)

    @invariant()
    def nothing_acts_twice_downstream(self) -> None:
        """Invariant 1: per run at most one ticket and one channel post, each under the key of
        a ledger entry for that tool and those args that does not say it never happened."""
        for model, tool in ((SandboxTicket, TICKET), (SandboxNotification, NOTIFY)):
            keys = list(model.objects.values_list("idempotency_key", flat=True))
            threads = [key.split(":")[0] for key in keys]
            assert len(threads) == len(set(threads)), f"a run acted twice through {tool}: {keys}"
            for key in keys:
                effect = Effect.objects.get(key=key)
                assert effect.tool == tool and effect.status != Effect.Status.FAILED, effect
        for ticket in SandboxTicket.objects.all():
            args = Effect.objects.get(key=ticket.idempotency_key).args
            made = {"service": ticket.service, "title": ticket.title, "severity": ticket.severity}
            assert made | {"body": ticket.body} == {"body": "", **args}, (made, args)

    @invariant()
    def no_approval_authorizes_two_keys(self) -> None:
        """Invariant 11: an approval is spent once, by its own run, for one key."""
        spent = ApprovalRequest.objects.exclude(spent_key="").values_list("spent_key", flat=True)
        assert len(spent) == len(set(spent)), list(spent)
        gated = list(Effect.objects.filter(approval__isnull=False).select_related("approval"))
        assert len({e.approval_id for e in gated}) == len(gated), "one approval, two effects"
        for effect in gated:
            assert effect.approval.spent_key == effect.key, (effect.key, effect.approval.spent_key)
            assert effect.approval.run_id == effect.run_id, effect.key

    @invariant()
    def unknown_outcomes_are_settled_or_escalated_after_a_sweep(self) -> None:
        """Invariant 13: what was unknown when the last sweep ran (in doubt, or claimed by a dead
        worker of a run that will never advance again) is settled by key or told to a person,
        unless nothing landed and a call may still land (EFFECT_SETTLE_AFTER_SECONDS)."""
        if self.swept_at is None:
            return
        quiet_since = self.swept_at - dt.timedelta(seconds=settings.EFFECT_SETTLE_AFTER_SECONDS)
        ended = {"run__status__in": ("dead", "failed"), "run__finished_at__lte": self.swept_at}
        unknown = Effect.objects.filter(
            Q(status=Effect.Status.IN_DOUBT, updated_at__lte=self.swept_at)
            | Q(status=Effect.Status.CLAIMED, **ended),
            escalated_at__isnull=True,
        )
        for effect in unknown:
            acted = _acted(effect)
            assert effect.updated_at > quiet_since and not acted, (
                f"{effect.key} ({effect.tool}) is still {effect.status} after a sweep, nobody was "
                f"told, and the downstream {'acted' if acted else 'has long not acted'}"
            )

    @invariant()
    def the_audit_chain_verifies(self) -> None:
        assert (result := chain_verify_db()).ok, result.as_dict()


@pytest.fixture(autouse=True)
def _world(settings, monkeypatch):
    """Fast people, no tool retry (a timeout is in doubt at once), a reachable dead letter,
    faults before each downstream call, a recorded task queue (the machine delivers it)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.TOOL_MAX_RETRIES = 0
    settings.RUN_MAX_FAILURES = 2
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    with (
        faults_injected(TICKET, NOTIFY, CLOSE) as armed,
        queue_recorded((*RUNNER_MODULES, *NOTIFICATION_MODULES)) as recorder,
    ):
        world.update(queue=recorder, faults=armed)
        yield


# A pytest test (with the fixtures above) that hypothesis reports on; the profile bounds it.
test_the_run_lifecycle_keeps_its_invariants_under_any_interleaving = (
    stateful.get_state_machine_test(Lifecycle, settings=hypothesis_settings())
)
