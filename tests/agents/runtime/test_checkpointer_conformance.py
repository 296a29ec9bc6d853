"""LangGraph's own checkpointer conformance suite (langgraph-checkpoint-conformance) against the
savers a worker can use: FastPostgresSaver (CHECKPOINTER=fast), FencedPostgresSaver
(CHECKPOINTER=postgres), PostgresSaver itself as the control, and on SQLite the SqliteSaver.

The suite calls only the async methods (``aput``, ``aget_tuple``...) and skips a capability
whose async method a saver does not override. Ours are sync savers (a django-q2 worker runs
``graph.stream``), so each runs through ``_async_view``: a subclass whose async methods call the
saver's own sync ones, for exactly the capabilities the sync saver implements. What is tested is
the sync code the worker runs, with no lease guard in the config (``put`` then writes as any
saver would) and epoch 0 on every checkpoint (the fence then picks the newest, as PostgresSaver).
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from django.db import connection
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from agents.runtime import checkpoint
from agents.runtime.fast_saver import FastPostgresSaver
from agents.runtime.fenced_saver import FencedPostgresSaver, FencedSqliteSaver

on_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the Postgres savers need Postgres"
)

# (async method, sync method) of each capability the suite knows.
_METHODS = {
    "aget_tuple": "get_tuple",
    "aput": "put",
    "aput_writes": "put_writes",
    "adelete_thread": "delete_thread",
    "adelete_for_runs": "delete_for_runs",
    "acopy_thread": "copy_thread",
    "aprune": "prune",
}


def _async_view(cls: type[BaseCheckpointSaver]) -> type[BaseCheckpointSaver]:
    """``cls`` whose async methods call its sync ones (only those ``cls`` overrides)."""
    namespace: dict[str, Any] = {}
    for amethod, method in _METHODS.items():
        if getattr(cls, method) is getattr(BaseCheckpointSaver, method):
            continue  # not implemented: the suite must see it missing, as it is

        async def call(self: Any, *args: Any, _method: str = method, **kwargs: Any) -> Any:
            return getattr(self, _method)(*args, **kwargs)

        namespace[amethod] = call

    async def alist(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for item in self.list(*args, **kwargs):
            yield item

    namespace["alist"] = alist
    return type(f"Async{cls.__name__}", (cls,), namespace)


def _run_suite(name: str, make: Any) -> Any:
    @checkpointer_test(name=name)
    async def registered() -> AsyncIterator[BaseCheckpointSaver]:
        with make() as saver:
            yield saver

    report = asyncio.run(validate(registered))
    report.print_report()
    return report


def _failures(report: Any) -> dict[str, list[Any]]:
    return {cap: result.failures for cap, result in report.results.items() if result.failures}


@pytest.fixture
def pg_schema(db) -> Iterator[str]:
    """A schema of its own with the checkpoint tables: the suite commits through its own
    connections, outside the test's transaction."""
    import psycopg

    schema = f"conformance_{uuid.uuid4().hex[:8]}"
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


def _postgres_factory(cls: type[PostgresSaver], conninfo: str) -> Any:
    from contextlib import contextmanager

    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    @contextmanager
    def make() -> Iterator[BaseCheckpointSaver]:
        # As agents.runtime.checkpoint builds it for a worker: a pool, autocommit, dict rows.
        pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=4,
            kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0},
            open=True,
        )
        try:
            yield _async_view(cls)(pool)
        finally:
            pool.close()

    return make


@on_postgres
@pytest.mark.parametrize(
    "cls", [FastPostgresSaver, FencedPostgresSaver, PostgresSaver], ids=lambda c: c.__name__
)
def test_the_postgres_savers_pass_the_conformance_suite(pg_schema, cls):
    report = _run_suite(cls.__name__, _postgres_factory(cls, pg_schema))
    assert _failures(report) == {}
    assert report.passed_all_base(), report.results
    # Every base capability ran (none skipped as "not implemented").
    assert all(report.results[cap.value].detected for cap in BASE_CAPABILITIES)


@pytest.mark.parametrize("cls", [FencedSqliteSaver, SqliteSaver], ids=lambda c: c.__name__)
def test_the_sqlite_savers_pass_the_conformance_suite(cls):
    from contextlib import contextmanager

    @contextmanager
    def make() -> Iterator[BaseCheckpointSaver]:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        try:
            saver = _async_view(cls)(conn)
            saver.setup()
            yield saver
        finally:
            conn.close()

    report = _run_suite(cls.__name__, make)
    assert _failures(report) == {}
    assert report.passed_all_base(), report.results
