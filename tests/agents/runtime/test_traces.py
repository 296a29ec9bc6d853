"""Traces of a run: one ``run.segment`` span per advance, linked to the one before; the tool
calls inside it; the approval's wait; the dead-letter event. And LangChain's callbacks see the
thread and run ids in their run metadata (LangSmith groups by them)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from django.contrib.auth.models import Group
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from opentelemetry.trace import StatusCode

from agents.models import Effect
from agents.runtime import advance
from agents.runtime.checkpoint import thread_config
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import run_start
from approvals.models import AgentRun
from approvals.services import approval_decide, policy_seed_demo
from tests.agents.runtime.test_query_budget import PHASE_BUDGET, _phases
from tests.support.agents import NoteState, build_note_graph
from tests.support.queue import NOTIFICATION_MODULES, RUNNER_MODULES
from tests.support.traces import spans_recorded

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

INCIDENT = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev3"}


@pytest.fixture
def queue_modules():
    return (*RUNNER_MODULES, *NOTIFICATION_MODULES)


@pytest.fixture
def spans():
    with spans_recorded() as recorded:
        yield recorded


@pytest.fixture
def reviewer(bob):
    policy_seed_demo()
    bob.groups.add(Group.objects.get(name="approvers-write"))
    return bob


def _ns(moment) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def test_a_demo_run_leaves_two_linked_segments_its_wait_and_its_tool_calls(alice, reviewer, spans):
    run = run_start(agent="incident_copilot", input=INCIDENT, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=reviewer, decision="approve", seen_hash=approval.payload_hash
    )
    assert advance.run_advance(run_id=run.id) == "completed"
    run = AgentRun.objects.get(pk=run.pk)
    approval.refresh_from_db()

    first, second = spans.named("run.segment")
    for segment in (first, second):
        assert segment.attributes["run.id"] == str(run.id)
        assert segment.attributes["thread.id"] == run.thread_id
        assert segment.attributes["agent"] == "incident_copilot"
        assert segment.attributes["graph.version"] == run.graph_version
        assert segment.parent is None  # each advance is a trace of its own
    assert (first.attributes["resume_count"], second.attributes["resume_count"]) == (0, 1)
    assert run.resume_count == 1
    assert first.attributes["run.outcome"] == "waiting"
    assert second.attributes["run.outcome"] == "completed"
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    assert first.links == ()

    (wait,) = spans.named("approval.wait")
    assert wait.attributes["approval.id"] == approval.id
    assert wait.attributes["run.id"] == str(run.id)
    assert wait.attributes["approval.decision"] == "approve"
    assert wait.attributes["approval.tier"] == approval.tier == "write"
    assert wait.attributes["approver.role"] == "approvers-write"
    assert wait.attributes["slo.exclude"] is True
    assert wait.start_time == _ns(approval.created_at)
    assert wait.end_time == _ns(approval.decided_at)

    effects = Effect.objects.filter(run=run)
    calls = spans.named("tool.call")
    assert effects and len(calls) == len(effects)
    assert {c.attributes["effect.key"] for c in calls} == {e.key for e in effects}
    assert {c.attributes["tool"] for c in calls} == {e.tool for e in effects}
    for call in calls:
        assert call.parent.span_id == second.context.span_id
        assert call.attributes["effect.key"].startswith(f"{run.thread_id}:")
        assert call.attributes["tool.outcome"] == "succeeded"
        assert call.attributes["tool.attempts"] == 1


def test_tracing_adds_no_query_to_any_phase_of_a_demo_run(alice, reviewer, spans):
    run, counts = _phases(alice, reviewer)
    assert run.status == "completed"
    assert len(spans.named("run.segment")) == 2 and spans.named("approval.wait")
    over = {name: (counts[name], PHASE_BUDGET[name]) for name in PHASE_BUDGET}
    assert all(count <= budget for count, budget in over.values()), over


def _broken_graph(*, checkpointer: Any) -> Any:
    def explode(state: NoteState) -> dict:
        raise ValueError("the tool's input is invalid")

    builder = StateGraph(NoteState)
    builder.add_node("explode", explode)
    builder.add_edge(START, "explode")
    builder.add_edge("explode", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
def broken_agent():
    yield agent_register(AgentSpec(name="broken_agent", version="1", factory=_broken_graph))
    agent_unregister("broken_agent")


def test_a_dead_run_leaves_a_dead_letter_event_on_its_segment(alice, broken_agent, spans):
    run = run_start(agent="broken_agent", input={"topic": "x"}, user=alice)
    outcome = advance.run_advance(run_id=run.id)
    assert outcome.startswith("dead: ValueError")
    assert AgentRun.objects.get(pk=run.pk).status == AgentRun.Status.DEAD

    (segment,) = spans.named("run.segment")
    assert segment.attributes["run.outcome"] == "dead"
    assert segment.status.status_code == StatusCode.ERROR
    (event,) = [e for e in segment.events if e.name == "run.dead_letter"]
    assert event.attributes["run.id"] == str(run.id)
    assert event.attributes["error.type"] == "ValueError"
    assert event.attributes["failures"] == 1
    assert event.attributes["retryable"] is False


class MetadataSeen(BaseCallbackHandler):
    def __init__(self) -> None:
        self.metadata: list[dict[str, Any]] = []

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.metadata.append(dict(kwargs.get("metadata") or {}))


def test_langchain_callbacks_see_the_thread_and_run_ids_in_their_metadata(alice, note_agent):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    graph = build_note_graph(checkpointer=InMemorySaver())
    handler = MetadataSeen()
    config = {**thread_config(run, version="1"), "callbacks": [handler]}
    graph.invoke({"topic": "disk"}, config)
    assert handler.metadata
    for metadata in handler.metadata:  # the graph and each of its nodes
        assert metadata["thread_id"] == run.thread_id
        assert metadata["run_id"] == str(run.id)
        assert metadata["graph_version"] == "1"
