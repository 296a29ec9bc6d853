"""FastPostgresSaver (CHECKPOINTER=fast): the same checkpoints as PostgresSaver and the same
fence as FencedPostgresSaver, read in one query, with pool calls side by side; and the fence's
history rule on both databases."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from typing import Any

import pytest
from django.db import connection
from langgraph.checkpoint.base import copy_checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.types import Command

from agents.runtime import checkpoint
from agents.runtime.at_rest import SealedPostgres
from agents.runtime.fast_saver import FastPostgresSaver
from agents.runtime.fenced_saver import EPOCH, FencedPostgresSaver, FencedSqliteSaver
from tests.support.agents import build_fan_graph

on_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the Postgres savers need Postgres"
)


@pytest.fixture
def pg_schema(db) -> Iterator[str]:
    """The conninfo of a schema of its own holding the checkpoint tables: the savers commit
    through their own connections, outside the test's transaction."""
    import psycopg

    schema = f"saver_{uuid.uuid4().hex[:8]}"
    base = checkpoint._postgres_conninfo(connection.settings_dict)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    conninfo = checkpoint._postgres_conninfo(
        {**connection.settings_dict, "OPTIONS": {"options": f"-c search_path={schema}"}}
    )
    checkpoint.postgres_setup(conninfo)
    try:
        yield conninfo
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def pooled(cls: type[PostgresSaver], conninfo: str) -> Iterator[Any]:
    """``cls`` on a pool, as agents.runtime.checkpoint builds it for a worker."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        conninfo,
        min_size=1,
        max_size=4,
        kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0},
        open=True,
    )
    try:
        yield cls(pool)
    finally:
        pool.close()


class _Counted:
    """A cursor that notes each statement it sends."""

    def __init__(self, cur: Any, sent: list[str]):
        self._cur, self._sent = cur, sent

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        self._sent.append(str(query))
        return self._cur.execute(query, *args, **kwargs)

    def executemany(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        self._sent.append(str(query))
        return self._cur.executemany(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur)


def _statements(saver: Any) -> list[str]:
    """Every statement ``saver`` sends from now on."""
    sent: list[str] = []
    real = saver._cursor

    @contextmanager
    def counting(**kwargs: Any) -> Iterator[Any]:
        with real(**kwargs) as cur:
            yield _Counted(cur, sent)

    saver._cursor = counting
    return sent


def _fan_thread(saver: Any) -> tuple[Any, dict[str, Any]]:
    """A fan graph paused at its parallel Send branches (TASKS writes, pending interrupts)."""
    graph = build_fan_graph(checkpointer=saver)
    config = {"configurable": {"thread_id": str(uuid.uuid4()), EPOCH: 1}}
    graph.invoke({"paths": ["a.py", "b.py"]}, config, durability="sync")
    return graph, config


class _PostgresSaverSealed(SealedPostgres, PostgresSaver):
    """PostgresSaver's own reads, with the serde and metadata of encryption at rest."""


@on_postgres
def test_the_fast_saver_reads_what_postgres_saver_reads(pg_schema):
    with (
        pooled(FastPostgresSaver, pg_schema) as fast,
        pooled(_PostgresSaverSealed, pg_schema) as stock,
    ):
        graph, config = _fan_thread(fast)
        thread = {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
        history = list(stock.list(thread))
        assert len(history) >= 2
        for tup in [*history, stock.get_tuple(thread)]:
            ours = fast.get_tuple(tup.config)
            assert ours == stock.get_tuple(tup.config)
        assert fast.get_tuple(thread) == stock.get_tuple(thread)
        assert graph.get_state(thread).interrupts  # paused at the branches' questions


@on_postgres
def test_the_fast_saver_migrates_an_old_checkpoints_pending_sends_as_postgres_saver(pg_schema):
    """A checkpoint of format < 4 takes its parent's TASKS writes into its channel values;
    PostgresSaver does it with a second query, the fast saver in the same one."""
    from langgraph.checkpoint.serde.types import TASKS
    from langgraph.types import Send

    with pooled(FastPostgresSaver, pg_schema) as fast, pooled(PostgresSaver, pg_schema) as stock:
        thread = str(uuid.uuid4())
        parent = empty_checkpoint()
        parent["v"] = 1
        saved = stock.put(
            {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
            parent,
            {"source": "loop", "step": 0},
            {},
        )
        stock.put_writes(saved, [(TASKS, Send("review", {"paths": ["a.py"]}))], "task-1")
        child = copy_checkpoint(parent)
        child["id"] = str(uuid6())
        child["channel_values"] = {"paths": ["a.py"]}
        child["channel_versions"] = {"paths": "1"}
        stock.put(saved, child, {"source": "loop", "step": 1}, {"paths": "1"})
        config = {"configurable": {"thread_id": thread}}
        expected = stock.get_tuple(config)
        assert TASKS in expected.checkpoint["channel_values"]  # the migration did happen
        assert fast.get_tuple(config) == expected


@on_postgres
def test_the_fast_saver_reads_a_checkpoint_in_one_statement(pg_schema):
    with (
        pooled(FastPostgresSaver, pg_schema) as fast,
        pooled(FencedPostgresSaver, pg_schema) as fenced,
    ):
        _, config = _fan_thread(fast)
        thread = {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
        ours, theirs = _statements(fast), _statements(fenced)
        assert fast.get_tuple(thread) == fenced.get_tuple(thread)
        assert len(ours) == 1
        assert len(theirs) == 2  # the head's id, then the row


@on_postgres
def test_calls_on_the_pool_run_side_by_side(pg_schema):
    """PostgresSaver's lock serialises every call, which one shared connection needs and a
    pool does not: with the fast saver a second call goes on while the first holds a cursor."""
    with (
        pooled(FastPostgresSaver, pg_schema) as fast,
        pooled(FencedPostgresSaver, pg_schema) as fenced,
    ):
        for saver, side_by_side in ((fast, True), (fenced, False)):
            held, went_on = threading.Event(), threading.Event()
            release = threading.Event()

            def hold(saver: Any = saver, held: Any = held, release: Any = release) -> None:
                with saver._cursor() as cur:
                    cur.execute("SELECT 1")
                    held.set()
                    release.wait(5)

            def second(saver: Any = saver, went_on: Any = went_on) -> None:
                with saver._cursor() as cur:
                    cur.execute("SELECT 1")
                went_on.set()

            first = threading.Thread(target=hold)
            first.start()
            assert held.wait(5)
            other = threading.Thread(target=second)
            other.start()
            assert went_on.wait(1.0) is side_by_side
            release.set()
            first.join()
            other.join()
            assert went_on.is_set()


def _history_case(saver: Any) -> tuple[dict[str, str], list[str], str]:
    """root (epoch 1) -> the head and a sibling (epoch 2, the lease holder's own), and a
    sibling written late at epoch 1 by a worker that lost the lease: the newest row."""
    thread = str(uuid.uuid4())
    ids: dict[str, str] = {}
    for name, parent, epoch in (
        ("root", None, 1),
        ("own", "root", 2),
        ("head", "root", 2),
        ("stale", "root", 1),
    ):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": "", EPOCH: epoch}
        if parent:
            conf["checkpoint_id"] = ids[parent]
        saver.put({"configurable": conf}, cp, {"source": "loop", "step": 0}, {})
        ids[name] = cp["id"]
    config = {"configurable": {"thread_id": thread}}
    listed = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]
    return ids, listed, saver.get_tuple(config).config["configurable"]["checkpoint_id"]


@pytest.mark.django_db
def test_history_hides_a_stale_workers_branch_and_lists_the_lease_holders_own(request):
    with ExitStack() as stack:
        if connection.vendor == "postgresql":
            conninfo = request.getfixturevalue("pg_schema")
            savers = [
                stack.enter_context(pooled(cls, conninfo))
                for cls in (FastPostgresSaver, FencedPostgresSaver)
            ]
        else:
            conn = stack.enter_context(closing(sqlite3.connect(":memory:")))
            savers = [FencedSqliteSaver(conn)]
            savers[0].setup()
        for saver in savers:
            ids, listed, head = _history_case(saver)
            assert head == ids["head"]
            assert ids["stale"] not in listed
            assert set(listed) == {ids["root"], ids["own"], ids["head"]}


def test_the_setting_picks_the_saver(db, settings):
    if connection.vendor != "postgresql":
        assert isinstance(checkpoint.checkpointer_get(), FencedSqliteSaver)
        return
    try:
        for choice, cls in (("fast", FastPostgresSaver), ("postgres", FencedPostgresSaver)):
            settings.CHECKPOINTER = choice
            assert type(checkpoint.checkpointer_get()) is cls
    finally:
        checkpoint.checkpointer_reset()


def test_an_unknown_checkpointer_is_refused_by_name(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from console.env import env_choice

    monkeypatch.setenv("CHECKPOINTER", "redis")
    with pytest.raises(ImproperlyConfigured, match="CHECKPOINTER"):
        env_choice("CHECKPOINTER", "fast", ("fast", "postgres"))


def test_a_resumed_fan_thread_completes_on_the_configured_saver(db):
    """The whole loop over the process's saver: pause at both branches, answer both."""
    graph = build_fan_graph(checkpointer=checkpoint.checkpointer_get())
    config = {"configurable": {"thread_id": str(uuid.uuid4()), EPOCH: 1}}
    graph.invoke({"paths": ["a.py", "b.py"]}, config, durability="sync")
    pending = graph.get_state(config).interrupts
    assert len(pending) == 2
    answer = {"decisions": [{"type": "approve"}]}
    graph.invoke(Command(resume={i.id: answer for i in pending}), config, durability="sync")
    state = graph.get_state(config)
    assert not state.interrupts and not state.next
