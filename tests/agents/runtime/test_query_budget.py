"""The Django queries of a run: a whole incident run, each of its phases, and each step.

Counts are deterministic (no timed assertions here; bench/run_inprocess.py measures time). The
run is driven as a worker and a reviewer drive it: ``run_start``, the advance task's body,
``approval_decide``, the advance again; the queue is recorded, not run. Real transactions
(``transaction=True``), so what is counted is what production sends. SQLite counts its
``BEGIN IMMEDIATE`` as a statement; Postgres sends ``BEGIN`` implicitly (not counted).
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from langgraph.graph import END, START, StateGraph

from agents.runtime import advance
from agents.runtime.budget import budget_spend
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import run_start
from approvals.models import AgentRun
from approvals.services import approval_decide, policy_seed_demo
from audit.models import AuditEvent
from audit.services import event_record, event_row, record_hash, record_text
from audit.verify import chain_verify_db
from tests.support.queue import NOTIFICATION_MODULES, RUNNER_MODULES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

INCIDENT = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev3"}

# The budgets, as CaptureQueriesContext counts (BEGIN and COMMIT included; the same on both
# databases). Before this work the same run cost 186 on Postgres, 174 on SQLite
# (docs/benchmarks.md, "One run in-process"); then 97; now 79 (start 4, to waiting 23, decide
# 17, to completed 35). The whole run also counts this test's two reads (the approval to
# decide, the run at the end): 81, exactly; its phases leave no room either.
# Sealing personal data under the run's data key (core/sealing.py) adds one query to each
# phase: the key's insert at the start, the key's read in each advance and in the decision
# (one per phase, lists included: core/sealed_query.py), and one to each of this test's two
# reads (outside a request or task scope, a read fetches the key): 87.
# Telling the reviewer what changed while the approval waited (approvals/changes.py) adds one
# query to the request (the tier's approver groups, for the policy digest) and one to the
# decision (the policy version, to know whether the policy changed at all): 89.
# A request e-mail carries a signed decision link for its recipient (approvals/links.py): the
# delivery, run inline here, inserts the link's row when it sends the e-mail (one per
# recipient; this run's tier has one): 90.
# Shadow mode (approvals/services/shadow.py) reads the autonomy rules of the new approvals'
# tools and tiers once per request (to record what a shadow rule would have done), and the
# decision settles the approval's shadow verdict, if any, in one UPDATE. Graduated autonomy
# (agents/hitl/autonomy.py) adds two queries to a gate that asks a person: an action already
# recorded under the call's key (a replay runs as recorded) and the autonomy rule of the tool
# or its tier (one query); the resumed gate reads the recorded action again (another gate of
# its node may have run without waiting). An effect no person approved (the notify post) reads
# its autonomous action's review state under a lock in the claim's transaction (an undo asked
# before it ran refuses it: agents/effects/undone.py): 96.
RUN_BUDGET = 96
PHASE_BUDGET = {"start": 5, "to waiting": 29, "to completed": 39}


@pytest.fixture
def queue_modules():
    return (*RUNNER_MODULES, *NOTIFICATION_MODULES)


@pytest.fixture
def reviewer(bob):
    policy_seed_demo()
    bob.groups.add(Group.objects.get(name="approvers-write"))
    return bob


def _phases(alice, reviewer) -> tuple[AgentRun, dict[str, int]]:
    """One incident run, start -> waiting -> approve -> completed; its queries per phase."""
    counts: dict[str, int] = {}

    def counted(name, function):
        with CaptureQueriesContext(connection) as queries:
            result = function()
        counts[name] = len(queries)
        return result

    run = counted("start", lambda: run_start(agent="incident_copilot", input=INCIDENT, user=alice))
    assert counted("to waiting", lambda: advance.run_advance(run_id=run.id)) == "waiting"
    approval = run.approvals.get()
    counted(
        "decide",
        lambda: approval_decide(
            approval=approval, user=reviewer, decision="approve", seen_hash=approval.payload_hash
        ),
    )
    assert counted("to completed", lambda: advance.run_advance(run_id=run.id)) == "completed"
    return AgentRun.objects.get(pk=run.pk), counts


def test_a_whole_incident_run_stays_within_its_query_budget(
    alice, reviewer, django_assert_max_num_queries
):
    with django_assert_max_num_queries(RUN_BUDGET):
        run, _ = _phases(alice, reviewer)
    assert run.status == "completed"
    assert run.output["outcome"]["status"] == "executed"
    assert chain_verify_db().ok


def test_each_phase_of_an_incident_run_stays_within_its_budget(alice, reviewer):
    run, counts = _phases(alice, reviewer)
    budget = PHASE_BUDGET
    over = {name: (counts[name], budget[name]) for name in budget if counts[name] > budget[name]}
    assert not over, f"phases over their query budget (queries, budget): {over}"
    assert run.steps_used == 5


class ChainState(TypedDict, total=False):
    """State of the chain agent: how many steps to take, and how many were taken."""

    length: int
    done: Annotated[int, operator.add]


def _chain_step(state: ChainState) -> dict:
    return {"done": 1}


def _chain_next(state: ChainState) -> str:
    return "step" if state.get("done", 0) < state["length"] else END


def build_chain_graph(*, checkpointer=None):
    builder = StateGraph(ChainState)
    builder.add_node("step", _chain_step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", _chain_next, ["step", END])
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
def chain_agent():
    spec = agent_register(AgentSpec(name="chain_agent", version="1", factory=build_chain_graph))
    yield spec
    agent_unregister("chain_agent")


def _advance_queries(alice, length: int) -> int:
    run = run_start(agent="chain_agent", input={"length": length}, user=alice)
    with CaptureQueriesContext(connection) as queries:
        assert advance.run_advance(run_id=run.id) == "completed"
    assert AgentRun.objects.get(pk=run.pk).steps_used == length
    return len(queries)


def test_each_step_of_an_advance_costs_the_runner_one_statement(chain_agent, alice):
    """Budget, cancel and lease read back in one statement per step: nothing else per step."""
    short, long = _advance_queries(alice, 2), _advance_queries(alice, 7)
    assert long - short == 5


def test_a_step_costs_one_statement_for_its_budget_and_the_stop_signals(
    alice, django_assert_num_queries
):
    run = run_start(agent="incident_copilot", input=INCIDENT, user=alice)
    AgentRun.objects.filter(pk=run.pk).update(tokens_used=10, failure_count=2)
    with django_assert_num_queries(1):
        progress = budget_spend(run, {"investigate": {"evidence": ["e1"]}})
    assert (progress.steps_used, progress.tokens_used) == (1, 10)
    assert (progress.cancel_requested, progress.lease_owner) == (False, "")
    with django_assert_num_queries(1):
        progress = budget_spend(run, {"propose_action": {"tokens_used": 40}})
    assert (progress.steps_used, progress.tokens_used) == (2, 40)  # the state's count leads
    stored = AgentRun.objects.get(pk=run.pk)
    assert (stored.steps_used, stored.tokens_used, stored.failure_count) == (2, 40, 0)


def test_a_replayed_step_counts_nothing_but_still_reads_the_stop_signals(alice):
    run = run_start(agent="incident_copilot", input=INCIDENT, user=alice)
    AgentRun.objects.filter(pk=run.pk).update(cancel_requested=True, failure_count=2)
    progress = budget_spend(run, {"investigate": {}, "__metadata__": {"cached": True}})
    assert progress.cancel_requested is True
    stored = AgentRun.objects.get(pk=run.pk)
    assert (stored.steps_used, stored.failure_count) == (0, 2)


def test_events_of_one_transaction_read_the_chain_head_once(bob, django_assert_num_queries):
    event_record(action="run.created", actor=bob)
    # BEGIN, the first INSERT (with the chain lock and the head read, one round trip), two
    # more INSERTs, COMMIT.
    queries = 5
    with django_assert_num_queries(queries), transaction.atomic():
        first = event_record(action="approval.requested", actor="agent:1")
        second = event_record(action="run.waiting", actor="agent:1")
        third = event_record(action="run.completed", actor="agent:1")
    assert (second.prev_hash, third.prev_hash) == (first.hash, second.hash)
    assert chain_verify_db().ok


def test_the_first_event_of_a_transaction_takes_one_round_trip(bob, django_assert_num_queries):
    """The chain lock, the head read and the INSERT in one statement sent; seq, canonical text
    and hash computed in SQL are the ones Python computes."""
    before = event_record(action="run.created", actor=bob)
    with django_assert_num_queries(3), transaction.atomic():  # BEGIN, the INSERT, COMMIT
        event = event_record(action="run.started", actor="agent:1", data={"seq": 7, "n": [1]})
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.seq, stored.prev_hash) == (before.seq + 1, before.hash)
    assert stored.canonical == event.canonical == record_text(event_row(stored))
    assert stored.hash == event.hash == record_hash(before.hash, stored.canonical)
    assert stored.data == {"seq": 7, "n": [1]}
    assert chain_verify_db().ok


def test_an_event_rolled_back_with_its_savepoint_is_not_taken_for_the_head(bob):
    with transaction.atomic():
        first = event_record(action="run.created", actor=bob)
        with pytest.raises(RuntimeError), transaction.atomic():
            event_record(action="run.started", actor="agent:1")
            raise RuntimeError("rolled back with its savepoint")
        after = event_record(action="run.waiting", actor="agent:1")
    assert (after.seq, after.prev_hash) == (first.seq + 1, first.hash)
    assert list(AuditEvent.objects.order_by("seq").values_list("action", flat=True)) == [
        "run.created",
        "run.waiting",
    ]
    assert chain_verify_db().ok


def test_an_event_after_a_rolled_back_transaction_reads_the_head_again(bob):
    kept = event_record(action="run.created", actor=bob)
    with pytest.raises(RuntimeError), transaction.atomic():
        event_record(action="run.started", actor="agent:1")
        raise RuntimeError("the whole transaction rolls back")
    after = event_record(action="run.waiting", actor="agent:1")
    assert (after.seq, after.prev_hash) == (kept.seq + 1, kept.hash)
    assert chain_verify_db().ok
