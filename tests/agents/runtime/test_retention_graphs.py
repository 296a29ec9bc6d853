"""Retention on threads of other shapes: a DeltaChannel's thread is kept whole (pruning would
empty that channel), a subgraph's namespace keeps its own final checkpoint, and a stale
worker's late checkpoint never outlives the fence's head."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from django.db import connection
from django.utils import timezone
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import copy_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph

from agents import selectors as agent_selectors
from agents.models import PrunedRun, RetentionPolicy
from agents.runtime import advance, retention
from agents.runtime.checkpoint import checkpointer_get, thread_config
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import run_start
from approvals.models import AgentRun
from tests.support.retention import OLD, checkpoint_rows, finished_run, thread_state

pytestmark = pytest.mark.django_db(transaction=True)


class _DeltaState(TypedDict, total=False):
    """A list kept by a DeltaChannel: each checkpoint stores only what changed."""

    items: Annotated[list, DeltaChannel(lambda state, writes: [*state, *writes])]


def _build_delta_graph(*, checkpointer: Any) -> Any:
    builder = StateGraph(_DeltaState)
    builder.add_node("one", lambda state: {"items": "a"})
    builder.add_node("two", lambda state: {"items": "b"})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
def delta_agent():
    spec = agent_register(AgentSpec(name="delta_agent", version="1", factory=_build_delta_graph))
    yield spec
    agent_unregister("delta_agent")


def test_a_thread_using_a_delta_channel_is_kept_whole(delta_agent, alice):
    run = run_start(agent="delta_agent", input={}, user=alice)
    assert advance.run_advance(run_id=run.id) == "completed"
    AgentRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() - OLD)
    run.refresh_from_db()
    assert thread_state(run).values["items"] == ["a", "b"]
    before = checkpoint_rows(run)

    result = retention.checkpoints_prune_pass()

    assert result.kept == [str(run.pk)] and result.runs == 0
    assert checkpoint_rows(run) == before
    assert thread_state(run).values["items"] == ["a", "b"]
    kept = PrunedRun.objects.get(run_id=run.pk)
    assert kept.outcome == "kept" and "DeltaChannel" in kept.reason
    assert agent_selectors.run_pruned(run=run) is None  # its history is whole: no notice
    assert retention.checkpoints_prune_pass().kept == []  # decided once


def test_a_thread_kept_for_its_delta_channel_is_deleted_once_its_policy_says_delete(
    delta_agent, alice
):
    run = run_start(agent="delta_agent", input={}, user=alice)
    assert advance.run_advance(run_id=run.id) == "completed"
    AgentRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() - OLD)
    assert retention.checkpoints_prune_pass().kept == [str(run.pk)]
    policy = RetentionPolicy(agent="delta_agent", keep_days=7, action="delete")
    retention.retention_policy_save(policy=policy, actor=alice, created=True)

    assert retention.checkpoints_prune_pass().deleted == [str(run.pk)]

    assert checkpoint_rows(run) == {"checkpoints": 0, "writes": 0, "blobs": 0}
    assert PrunedRun.objects.get(run_id=run.pk).outcome == "delete"


class _OuterState(TypedDict, total=False):
    """A list the inner graph appends to, one node after another."""

    items: Annotated[list, operator.add]


def _build_nested_graph(*, checkpointer: Any) -> Any:
    inner = StateGraph(_OuterState)
    inner.add_node("x", lambda state: {"items": ["x"]})
    inner.add_node("y", lambda state: {"items": ["y"]})
    inner.add_edge(START, "x")
    inner.add_edge("x", "y")
    inner.add_edge("y", END)
    outer = StateGraph(_OuterState)
    outer.add_node("first", lambda state: {"items": ["first"]})
    outer.add_node("inner", inner.compile(checkpointer=True))  # keeps its own namespace
    outer.add_edge(START, "first")
    outer.add_edge("first", "inner")
    outer.add_edge("inner", END)
    return outer.compile(checkpointer=checkpointer)


@pytest.fixture
def nested_agent():
    spec = agent_register(AgentSpec(name="nested_agent", version="1", factory=_build_nested_graph))
    yield spec
    agent_unregister("nested_agent")


def _checkpoints_by_namespace(run: AgentRun) -> dict[str, int]:
    sql = "SELECT checkpoint_ns, count(*) FROM checkpoints WHERE thread_id = {} GROUP BY 1"
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute(sql.format("%s"), [run.thread_id])
            return dict(cur.fetchall())
    with checkpointer_get().cursor(transaction=False) as cur:
        cur.execute(sql.format("?"), (run.thread_id,))
        return dict(cur.fetchall())


def test_prune_to_final_keeps_the_final_checkpoint_of_every_namespace(nested_agent, alice):
    run = run_start(agent="nested_agent", input={}, user=alice)
    assert advance.run_advance(run_id=run.id) == "completed"
    AgentRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() - OLD)
    run.refresh_from_db()
    before = _checkpoints_by_namespace(run)
    assert len(before) == 2 and all(n > 1 for n in before.values())  # root and the subgraph's
    final = thread_state(run).values

    assert retention.checkpoints_prune_pass().final == [str(run.pk)]

    assert _checkpoints_by_namespace(run) == {ns: 1 for ns in before}
    assert thread_state(run).values == final
    assert final["items"][-2:] == ["x", "y"]


def test_prune_to_final_keeps_the_fences_head_not_a_stale_workers_newer_checkpoint(
    note_agent, alice, bob
):
    """A worker that lost its lease may still have written a checkpoint with a newer id but an
    older lease epoch; the head ``get_state`` reads is the new owner's, and that one is kept
    (LangGraph's own ``PostgresSaver.prune`` would keep the newest id)."""
    run = finished_run(alice, bob)
    saver = checkpointer_get()
    head = saver.get_tuple(thread_config(run))
    stale = copy_checkpoint(head.checkpoint)
    stale["id"] = str(uuid6())  # newer than every checkpoint of the thread
    parent = {
        "configurable": {
            "thread_id": run.thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": head.parent_config["configurable"]["checkpoint_id"],
            "lease_epoch": head.metadata["lease_epoch"] - 1,
        }
    }
    saver.put(parent, stale, {"source": "loop", "step": 99}, {})
    final = thread_state(run)

    assert retention.checkpoints_prune_pass().final == [str(run.pk)]

    assert checkpoint_rows(run)["checkpoints"] == 1
    kept = saver.get_tuple(thread_config(run))
    assert (
        kept.config["configurable"]["checkpoint_id"] == head.config["configurable"]["checkpoint_id"]
    )
    assert thread_state(run).values == final.values
