"""Encryption at rest under test: a graph that plants a secret in every kind of channel, savers
on a scratch Postgres schema or SQLite file, and the raw bytes of their tables to search.

The secret graph: ``plant`` fills a str, an int, a float, a bool, a dict and a messages channel;
then ``side`` (writes a str) and ``ask`` (interrupts with a secret question) run side by side,
so the paused checkpoint holds ``side``'s pending write and the interrupt payload; the resume
value and the run's config (metadata and a configurable value) carry secrets too.
"""

from __future__ import annotations

import base64
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

SECRET = "s3cret-str-channel-7d1f"
SECRET_INT = 918_273_645_501
SECRET_FLOAT = 73_914.062_5
SECRET_DICT = "s3cret-dict-value-4be2"
SECRET_MESSAGE = "s3cret-in-a-message-a09c"
SECRET_SIDE = "s3cret-pending-write-55e1"
SECRET_QUESTION = "s3cret-interrupt-payload-c3d8"
SECRET_ANSWER = "s3cret-resume-value-91fa"
SECRET_METADATA = "s3cret-config-metadata-0b7e"
SECRET_CONFIGURABLE = "s3cret-configurable-value-e6f4"

KEY_1 = base64.b64encode(bytes(range(32))).decode()
KEY_2 = base64.b64encode(bytes(range(32, 64))).decode()


def secret_patterns() -> dict[str, list[bytes]]:
    """Each planted secret as it would appear in plaintext: its text, and for numbers also
    their msgpack encoding."""
    patterns = {
        name: [value.encode()]
        for name, value in {
            "str channel": SECRET,
            "dict channel": SECRET_DICT,
            "messages": SECRET_MESSAGE,
            "pending write": SECRET_SIDE,
            "interrupt payload": SECRET_QUESTION,
            "resume value": SECRET_ANSWER,
            "metadata": SECRET_METADATA,
            "configurable in metadata": SECRET_CONFIGURABLE,
        }.items()
    }
    patterns["int channel"] = [str(SECRET_INT).encode(), ormsgpack.packb(SECRET_INT)]
    patterns["float channel"] = [str(SECRET_FLOAT).encode(), ormsgpack.packb(SECRET_FLOAT)]
    return patterns


def leaks(raw: bytes) -> list[str]:
    """The planted secrets found in ``raw`` (also as hex, as Postgres prints a bytea)."""
    found = []
    lowered = raw.lower()
    for name, patterns in secret_patterns().items():
        if any(p in raw or p.hex().encode() in lowered for p in patterns):
            found.append(name)
    return found


class SecretState(TypedDict, total=False):
    """A channel of each kind."""

    note: str
    count: int
    ratio: float
    flag: bool
    details: dict
    messages: Annotated[list, add_messages]
    side: str
    answer: str
    done: bool


def _plant(state: SecretState) -> dict[str, Any]:
    return {
        "note": SECRET,
        "count": SECRET_INT,
        "ratio": SECRET_FLOAT,
        "flag": True,
        "details": {"token": SECRET_DICT},
        "messages": [HumanMessage(SECRET_MESSAGE), AIMessage("noted")],
    }


def _side(state: SecretState) -> dict[str, Any]:
    return {"side": SECRET_SIDE}


def _ask(state: SecretState) -> dict[str, Any]:
    return {"answer": interrupt({"question": SECRET_QUESTION})}


def _finish(state: SecretState) -> dict[str, Any]:
    return {"done": True}


def build_secret_graph(*, checkpointer: Any) -> Any:
    builder = StateGraph(SecretState)
    for name, node in (("plant", _plant), ("side", _side), ("ask", _ask), ("finish", _finish)):
        builder.add_node(name, node)
    builder.add_edge(START, "plant")
    builder.add_edge("plant", "side")
    builder.add_edge("plant", "ask")
    builder.add_edge(["side", "ask"], "finish")
    builder.add_edge("finish", END)
    return builder.compile(checkpointer=checkpointer)


def secret_config(thread_id: str | None = None) -> dict[str, Any]:
    """A thread's config whose metadata and configurable values carry secrets."""
    return {
        "configurable": {
            "thread_id": thread_id or str(uuid.uuid4()),
            "tenant_note": SECRET_CONFIGURABLE,
        },
        "metadata": {"note": SECRET_METADATA},
    }


def finished_values() -> dict[str, Any]:
    """What the secret graph's state must read after the resume, messages aside."""
    return {
        "note": SECRET,
        "count": SECRET_INT,
        "ratio": SECRET_FLOAT,
        "flag": True,
        "details": {"token": SECRET_DICT},
        "side": SECRET_SIDE,
        "answer": SECRET_ANSWER,
        "done": True,
    }


# --- savers on scratch storage ----------------------------------------------------------------


@contextmanager
def postgres_schema(settings_dict: dict[str, Any]) -> Iterator[str]:
    """The conninfo of a fresh schema holding the checkpoint tables; dropped afterwards."""
    import psycopg

    from agents.runtime import checkpoint

    schema = f"at_rest_{uuid.uuid4().hex[:8]}"
    base = checkpoint._postgres_conninfo(settings_dict)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    conninfo = checkpoint._postgres_conninfo(
        {**settings_dict, "OPTIONS": {"options": f"-c search_path={schema}"}}
    )
    checkpoint.postgres_setup(conninfo)
    try:
        yield conninfo
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def postgres_saver(cls: type, conninfo: str) -> Iterator[Any]:
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


@contextmanager
def sqlite_saver(cls: type, path: Path) -> Iterator[Any]:
    """``cls`` on the SQLite file ``path`` in WAL mode, as the embedded default."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    try:
        saver = cls(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()


POSTGRES_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def postgres_raw(cursor: Any, *, thread_id: str | None = None) -> bytes:
    """Every column of every row of the checkpoint tables (of one thread), as Postgres prints
    them (a bytea in hex), one row a line."""
    lines = []
    for table in POSTGRES_TABLES:
        where = " WHERE t.thread_id = %s" if thread_id else ""
        cursor.execute(f"SELECT t::text FROM {table} t{where}", [thread_id] if thread_id else [])
        lines += [row[0] if isinstance(row, tuple) else next(iter(row.values())) for row in cursor]
    return "\n".join(lines).encode()


def sqlite_raw(path: Path) -> bytes:
    """The bytes of the SQLite file and of its write-ahead log."""
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def datakey_rewrap(run_id: Any, *, ring_from: str, ring_to: str) -> None:
    """Wrap the run's data key (core/sealing.py) again, from one master key ring to another:
    what a rotation does, so a test can take away a checkpoint's key and not the run's."""
    from django.test import override_settings

    from core.keyring import keyring_get
    from core.models import DataKey

    row = DataKey.objects.get(run_id=run_id)
    aad = b"datakey:" + row.run_id.bytes  # core/sealing.py's AAD of a data key
    with override_settings(ENCRYPTION_KEYS=ring_from):
        dek = keyring_get().open(bytes(row.wrapped), aad=aad)
    with override_settings(ENCRYPTION_KEYS=ring_to):
        wrapped = keyring_get().seal(dek, aad=aad)
    DataKey.objects.filter(run_id=run_id).update(wrapped=wrapped)
