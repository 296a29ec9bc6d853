"""Checkpoints encrypted at rest (agents/runtime/at_rest.py): no planted secret is readable in
the raw checkpoint tables, whatever channel holds it, and threads stay readable across a key
rotation and from before encryption; a removed key is a clear, final error."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from agents.runtime import advance
from agents.runtime.at_rest import CheckpointKeyMissing, CheckpointUnreadable
from agents.runtime.checkpoint import checkpoint_sqlite_path
from agents.runtime.failures import is_retryable
from agents.runtime.fast_saver import FastPostgresSaver
from agents.runtime.fenced_saver import FencedPostgresSaver, FencedSqliteSaver
from agents.services import run_start
from approvals.models import AgentRun
from approvals.services import approval_decide
from audit.models import AuditEvent
from tests.support.agents import CALLS
from tests.support.at_rest import (
    KEY_1,
    KEY_2,
    SECRET_ANSWER,
    SECRET_CONFIGURABLE,
    SECRET_MESSAGE,
    SECRET_METADATA,
    SECRET_QUESTION,
    SECRET_SIDE,
    build_secret_graph,
    datakey_rewrap,
    finished_values,
    leaks,
    postgres_raw,
    postgres_saver,
    postgres_schema,
    secret_config,
    secret_patterns,
    sqlite_raw,
    sqlite_saver,
)

# Every test: pytest-django creates the test database only for tests that ask for it.
pytestmark = pytest.mark.django_db

K1 = f"k1:{KEY_1}"
K2_K1 = f"k2:{KEY_2},k1:{KEY_1}"
K2 = f"k2:{KEY_2}"


@dataclass
class Storage:
    """Checkpoint storage with our saver and LangGraph's own (plaintext) on the same tables."""

    ours: Callable[[], AbstractContextManager[Any]]
    stock: Callable[[], AbstractContextManager[Any]]
    raw: Callable[[str], bytes]  # the thread's rows (Postgres), the whole file (SQLite)
    types: Callable[[str], set[str]]  # serialisation types of the thread's stored values
    inline: Callable[[str], list[str]]  # channels kept in plaintext JSON (Postgres)


def _postgres_storage(cls: type, conninfo: str) -> Storage:
    import psycopg

    def query(sql: str, thread_id: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(conninfo) as conn:
            return conn.execute(sql, [thread_id] * sql.count("%s")).fetchall()

    def raw(thread_id: str) -> bytes:
        with psycopg.connect(conninfo) as conn:
            return postgres_raw(conn.cursor(), thread_id=thread_id)

    return Storage(
        ours=lambda: postgres_saver(cls, conninfo),
        stock=lambda: postgres_saver(PostgresSaver, conninfo),
        raw=raw,
        types=lambda t: {
            r[0]
            for r in query(
                "SELECT type FROM checkpoint_blobs WHERE thread_id = %s"
                " UNION SELECT type FROM checkpoint_writes WHERE thread_id = %s",
                t,
            )
        },
        inline=lambda t: [
            r[0]
            for r in query(
                "SELECT k FROM checkpoints, jsonb_object_keys(checkpoint -> 'channel_values') k"
                " WHERE thread_id = %s",
                t,
            )
        ],
    )


def _sqlite_storage(path: Any) -> Storage:
    def types(thread_id: str) -> set[str]:
        with sqlite3.connect(str(path)) as conn:
            return {
                r[0]
                for r in conn.execute(
                    "SELECT type FROM checkpoints WHERE thread_id = ?"
                    " UNION SELECT type FROM writes WHERE thread_id = ?",
                    [thread_id, thread_id],
                )
            }

    return Storage(
        ours=lambda: sqlite_saver(FencedSqliteSaver, path),
        stock=lambda: sqlite_saver(SqliteSaver, path),
        raw=lambda _thread: sqlite_raw(path),
        types=types,
        inline=lambda _thread: [],  # the whole checkpoint goes through the serde
    )


@pytest.fixture(params=["fast", "fenced", "sqlite"])
def storage(request, tmp_path) -> Iterator[Storage]:
    if request.param == "sqlite":
        yield _sqlite_storage(tmp_path / "checkpoints.sqlite3")
        return
    if connection.vendor != "postgresql":
        pytest.skip("the Postgres savers need Postgres")
    cls = FastPostgresSaver if request.param == "fast" else FencedPostgresSaver
    with postgres_schema(connection.settings_dict) as conninfo:
        yield _postgres_storage(cls, conninfo)


def _pause(saver: Any, config: dict[str, Any]) -> Any:
    graph = build_secret_graph(checkpointer=saver)
    graph.invoke({}, config, durability="sync")
    return graph


def _resume_and_check(graph: Any, config: dict[str, Any]) -> None:
    graph.invoke(Command(resume=SECRET_ANSWER), config, durability="sync")
    values = graph.get_state(config).values
    assert {k: values.get(k) for k in finished_values()} == finished_values()
    assert [m.content for m in values["messages"]] == [SECRET_MESSAGE, "noted"]


@override_settings(ENCRYPTION_KEYS=K1)
def test_a_secret_in_every_kind_of_channel_is_not_in_the_raw_checkpoint_tables(storage):
    config = secret_config()
    thread = config["configurable"]["thread_id"]
    with storage.ours() as saver:
        graph = _pause(saver, config)
        paused = graph.get_state(config)
        assert [i.value for i in paused.interrupts] == [{"question": SECRET_QUESTION}]
        head = saver.get_tuple(config)
        assert ("side", SECRET_SIDE) in [(c, v) for _, c, v in head.pending_writes]
        assert head.metadata["note"] == SECRET_METADATA  # sealed, and opened on read
        assert head.metadata["tenant_note"] == SECRET_CONFIGURABLE
        assert leaks(storage.raw(thread)) == []
        _resume_and_check(graph, config)
        assert leaks(storage.raw(thread)) == []
    assert storage.inline(thread) == []
    assert storage.types(thread) and all(t.endswith("+aesgcm.k1") for t in storage.types(thread))


def test_the_search_finds_every_secret_that_langgraphs_own_saver_stores(storage):
    """The control: without encryption every planted secret is found, so the search works."""
    config = secret_config()
    with storage.stock() as saver:
        _resume_and_check(_pause(saver, config), config)
        assert sorted(leaks(storage.raw(config["configurable"]["thread_id"]))) == sorted(
            secret_patterns()
        )


@override_settings(ENCRYPTION_KEYS=K1)
def test_a_thread_written_in_plaintext_before_encryption_is_read_and_resumed(storage):
    config = secret_config()
    thread = config["configurable"]["thread_id"]
    with storage.stock() as stock:
        _pause(stock, config)
    assert not any("+" in t for t in storage.types(thread))
    with storage.ours() as saver:
        graph = build_secret_graph(checkpointer=saver)
        state = graph.get_state(config)
        assert state.values["count"] == finished_values()["count"]
        assert [i.value for i in state.interrupts] == [{"question": SECRET_QUESTION}]
        assert state.metadata["note"] == SECRET_METADATA
        _resume_and_check(graph, config)
    assert any(t.endswith("+aesgcm.k1") for t in storage.types(thread))


def test_a_thread_written_under_k1_resumes_after_rotating_to_k2_k1(storage):
    config = secret_config()
    thread = config["configurable"]["thread_id"]
    with storage.ours() as saver:
        with override_settings(ENCRYPTION_KEYS=K1):
            graph = _pause(saver, config)
        with override_settings(ENCRYPTION_KEYS=K2_K1):
            _resume_and_check(graph, config)
    suffixes = {t.rpartition("+")[2] for t in storage.types(thread)}
    assert suffixes == {"aesgcm.k1", "aesgcm.k2"}


def test_a_thread_whose_key_was_removed_fails_with_an_error_naming_encryption_keys(storage):
    config = secret_config()
    with storage.ours() as saver:
        with override_settings(ENCRYPTION_KEYS=K1):
            graph = _pause(saver, config)
        with override_settings(ENCRYPTION_KEYS=K2):
            with pytest.raises(CheckpointKeyMissing, match="key 'k1'.*ENCRYPTION_KEYS") as caught:
                graph.get_state(config)
            with pytest.raises(CheckpointKeyMissing):
                graph.invoke(Command(resume=SECRET_ANSWER), config, durability="sync")
        assert not is_retryable(caught.value)
        with override_settings(ENCRYPTION_KEYS=K2_K1):  # the key put back: nothing was lost
            _resume_and_check(graph, config)


def test_a_key_id_that_now_names_another_key_is_refused_not_misread(storage):
    config = secret_config()
    with storage.ours() as saver:
        with override_settings(ENCRYPTION_KEYS=K1):
            graph = _pause(saver, config)
        with (
            override_settings(ENCRYPTION_KEYS=f"k1:{KEY_2}"),
            pytest.raises(CheckpointUnreadable, match="same key"),
        ):
            graph.get_state(config)


# --- through the runner: the note agent, its approval, the console's own checkpointer ----------


def _raw_of_run(run: AgentRun) -> bytes:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            return postgres_raw(cursor, thread_id=run.thread_id)
    return sqlite_raw(checkpoint_sqlite_path())


def _decide(run: AgentRun, user: Any) -> None:
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=user, decision="approve", seen_hash=approval.payload_hash
    )


def test_a_run_approved_across_a_key_rotation_completes_and_its_topic_stays_sealed(
    note_agent, alice, bob
):
    topic = "s3cret-topic-of-the-run-f00d"
    with override_settings(ENCRYPTION_KEYS=K1):
        run = run_start(agent="note_agent", input={"topic": topic}, user=alice)
        assert advance.run_advance(run_id=run.id) == "waiting"
        _decide(run, bob)
    assert topic.encode() not in _raw_of_run(run)
    with override_settings(ENCRYPTION_KEYS=K2_K1):
        assert advance.run_advance(run_id=run.id) == "completed"
        run.refresh_from_db()  # the run's data key is wrapped under k1: read with k1 in the ring
    assert run.output["log"] == ["propose", "approve", "executed"]
    assert CALLS[0]["args"]["text"] == f"about {topic}"
    assert topic.encode() not in _raw_of_run(run)


def test_a_run_whose_checkpoint_key_was_removed_goes_dead_naming_encryption_keys(
    note_agent, alice, bob
):
    with override_settings(ENCRYPTION_KEYS=K1):
        run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
        advance.run_advance(run_id=run.id)
        _decide(run, bob)
    # The run's data key (core/sealing.py) moves to k2, its checkpoints do not: only the
    # checkpoint key is missing below, so the run can still be marked dead.
    datakey_rewrap(run.pk, ring_from=K1, ring_to=K2)
    with override_settings(ENCRYPTION_KEYS=K2):
        outcome = advance.run_advance(run_id=run.id)
        run.refresh_from_db()
    assert outcome.startswith("dead: CheckpointKeyMissing")
    assert run.status == AgentRun.Status.DEAD
    assert "ENCRYPTION_KEYS" in run.error
    escalated = AuditEvent.objects.get(action="run.escalated", run_id=run.id)
    assert escalated.data["retryable"] is False
    assert CALLS == []
