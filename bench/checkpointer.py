"""The checkpointer per step: what durability costs over the bare graph, and its round trips.

A six-node graph whose state is the size of the incident copilot's (a findings dict, an
evidence list, a proposal: about 2 KB serialised), streamed with ``durability="sync"`` as the
advance does, under each saver in turn, interleaved so a busy machine slows them alike:

- bare graph + InMemorySaver (the floor);
- PostgresSaver alone (no fence, no encryption), on a psycopg ConnectionPool as the worker has;
- FencedPostgresSaver (today's worker: lease fence, epoch in the metadata);
- FastPostgresSaver (``CHECKPOINTER=fast``, the default: fenced, reads in one query, no lock
  around the pool);
- SqliteSaver (the embedded default, fenced) on a file in a temporary directory.

The last three are encrypted at rest (``agents/runtime/at_rest.py``) under the key ring of the
console's settings (``ENCRYPTION_KEYS``, or the key derived from ``SECRET_KEY``).

Round trips are counted on the wire: the savers connect through a local TCP relay that counts
each time the client sends after the server has answered (one INSERT in autocommit is 1).
The anchor is one INSERT + COMMIT on the same server, timed in the same run.

    .venv/bin/python bench/checkpointer.py                      # 30 runs per saver
    .venv/bin/python bench/checkpointer.py --runs 100
    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_checkpointer \
        .venv/bin/python bench/checkpointer.py

BENCH_DATABASE_URL names a scratch database (created when missing; the checkpoint tables are
created in it). Postgres for the Postgres savers; SQLite needs nothing.
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_checkpointer"
NODES = 6
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
# Our savers seal with the key ring of the console's settings.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

from bench.report import figure, section  # noqa: E402 - after the path that finds it


class State(TypedDict, total=False):
    service: str
    findings: dict[str, Any]
    evidence: list[str]
    proposal: dict[str, Any]
    outcome: dict[str, Any]
    tokens_used: int


def _findings(step: int) -> dict[str, Any]:
    return {
        "metrics": {"error_rate_pct": 5.2 + step, "p95_latency_ms": 840, "window_minutes": 60},
        "logs": {
            "matches": [
                {"ts": f"2026-12-01T10:{i:02d}:00Z", "line": f"upstream 503 from payments #{i}"}
                for i in range(5)
            ]
        },
        "deploys": [
            {"version": f"v1.{i}.{step}", "previous_version": f"v1.{i}.0", "is_rollback": False}
            for i in range(3)
        ],
    }


def graph_build(checkpointer: Any) -> Any:
    """Six nodes in a line, each writing about as much state as the incident copilot's."""
    from langgraph.graph import END, START, StateGraph

    def node(step: int) -> Callable[[State], dict[str, Any]]:
        def run(state: State) -> dict[str, Any]:
            return {
                "findings": _findings(step),
                "evidence": [f"evidence {step}.{i}: " + "x" * 120 for i in range(6)],
                "proposal": {
                    "tool": "rollback_deploy",
                    "args": {"to": f"v1.{step}"},
                    "why": "y" * 400,
                },
                "tokens_used": state.get("tokens_used", 0) + 250,
            }

        return run

    builder = StateGraph(State)
    names = [f"n{i}" for i in range(NODES)]
    for i, name in enumerate(names):
        builder.add_node(name, node(i))
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:], strict=False):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder.compile(checkpointer=checkpointer)


class _Guard:
    def assert_held(self) -> None:
        return None


def run_once(graph: Any, *, fenced: bool) -> float:
    """Seconds for one whole run of the graph on a new thread, as the advance streams it."""
    from agents.runtime.fenced_saver import EPOCH, GUARD

    config: dict[str, Any] = {"configurable": {"thread_id": str(uuid.uuid4())}}
    if fenced:
        config["configurable"].update({EPOCH: 1, GUARD: _Guard()})
    started = time.perf_counter()
    for _ in graph.stream(
        {"service": "checkout"}, config, stream_mode="updates", durability="sync"
    ):
        pass
    return time.perf_counter() - started


# --- a TCP relay that counts round trips -------------------------------------------------------


class Relay:
    """Forwards 127.0.0.1:<port> to the server and counts client turns (a send after a reply)."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.turns = 0
        self._lock = threading.Lock()
        self._last: dict[int, str] = {}
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            key = id(client)
            threading.Thread(
                target=self._pump, args=(client, upstream, key, "c"), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(upstream, client, key, "s"), daemon=True
            ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, key: int, side: str) -> None:
        try:
            while data := src.recv(65536):
                with self._lock:
                    if side == "c" and self._last.get(key) != "c":
                        self.turns += 1
                    self._last[key] = side
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def reset(self) -> None:
        with self._lock:
            self.turns = 0


# --- the savers -----------------------------------------------------------------------------------


def _conninfo(url: str, *, port: int | None = None) -> str:
    parts = urlsplit(url)
    if port is not None:
        netloc = f"{parts.username + '@' if parts.username else ''}127.0.0.1:{port}"
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def database_ensure(url: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import sql
    from psycopg.rows import dict_row

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(url, autocommit=True, row_factory=dict_row, prepare_threshold=0) as conn:
        PostgresSaver(conn).setup()
        conn.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")


@contextmanager
def postgres_saver(kind: str, conninfo: str) -> Iterator[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from agents.runtime.fast_saver import FastPostgresSaver
    from agents.runtime.fenced_saver import FencedPostgresSaver

    cls = {"postgres": PostgresSaver, "fenced": FencedPostgresSaver, "fast": FastPostgresSaver}[
        kind
    ]
    # As agents.runtime.checkpoint builds it for a worker.
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
def sqlite_saver(path: Path) -> Iterator[Any]:
    from agents.runtime.fenced_saver import FencedSqliteSaver

    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    saver = FencedSqliteSaver(conn)
    saver.setup()
    try:
        yield saver
    finally:
        conn.close()


def insert_commit_ms(conninfo: str, repeat: int) -> float:
    """One INSERT + COMMIT (autocommit), median over ``repeat``."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True, prepare_threshold=0) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_anchor (id bigserial PRIMARY KEY, body text)"
        )
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            conn.execute("INSERT INTO bench_anchor (body) VALUES (%s)", ["x" * 100])
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _step_rows(i: int) -> tuple[Any, dict[str, Any], dict[str, str], list[tuple[str, Any]]]:
    """A checkpoint of the graph's state after step ``i`` and the writes of its task."""
    from langgraph.pregel._checkpoint import empty_checkpoint  # the format the loop writes

    values = {
        "findings": _findings(i),
        "evidence": [f"evidence {i}.{j}: " + "x" * 120 for j in range(6)],
        "proposal": {"tool": "rollback_deploy", "args": {"to": f"v1.{i}"}, "why": "y" * 400},
        "tokens_used": 250 * i,
    }
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = {k: f"{i:032}.0" for k in values}
    new_versions = {k: f"{i:032}.0" for k in values}
    return checkpoint, {"source": "loop", "step": i}, new_versions, list(values.items())


class Step:
    """Writes one step (``put`` then the task's ``put_writes``) on a thread of its own."""

    def __init__(self, saver: Any, *, fenced: bool):
        from agents.runtime.fenced_saver import EPOCH, GUARD

        self.saver = saver
        self.conf: dict[str, Any] = {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}
        if fenced:
            self.conf.update({EPOCH: 1, GUARD: _Guard()})
        self.parent: str | None = None
        self.i = 0

    def put(self) -> dict[str, Any]:
        self.i += 1
        checkpoint, metadata, versions, self.writes = _step_rows(self.i)
        conf = dict(self.conf, **({"checkpoint_id": self.parent} if self.parent else {}))
        saved = self.saver.put({"configurable": conf}, checkpoint, metadata, versions)
        self.parent = saved["configurable"]["checkpoint_id"]
        return {"configurable": {**self.conf, **saved["configurable"]}}

    def put_writes(self, saved: dict[str, Any]) -> None:
        self.saver.put_writes(saved, self.writes, str(uuid.uuid4()))


def calls_ms(savers: dict[str, Any], repeat: int) -> dict[str, tuple[float, float, float]]:
    """Median ms of a ``put``, a ``put_writes`` and a head ``get_tuple``, interleaved."""
    steps = {kind: Step(saver, fenced=kind != "postgres") for kind, saver in savers.items()}
    times: dict[str, tuple[list[float], list[float], list[float]]] = {
        kind: ([], [], []) for kind in savers
    }
    for n in range(repeat + 5):
        for kind, step in steps.items():
            started = time.perf_counter()
            saved = step.put()
            middle = time.perf_counter()
            step.put_writes(saved)
            ended = time.perf_counter()
            step.saver.get_tuple({"configurable": {"thread_id": step.conf["thread_id"]}})
            read = time.perf_counter()
            if n >= 5:  # the first ones prepare the statements on the connection
                times[kind][0].append(middle - started)
                times[kind][1].append(ended - middle)
                times[kind][2].append(read - ended)
    return {
        kind: tuple(statistics.median(v) * 1000 for v in lists)  # type: ignore[misc]
        for kind, lists in times.items()
    }


def turns_counted(relay: Relay, kind: str, conninfo: str) -> dict[str, float]:
    """Round trips of a ``put``, a ``put_writes``, a head ``get_tuple``, and a run per step."""
    with postgres_saver(kind, conninfo) as saver:
        graph = graph_build(saver)
        for _ in range(8):  # warm: connections open, statements prepared on each
            run_once(graph, fenced=kind != "postgres")
        relay.reset()
        run_once(graph, fenced=kind != "postgres")
        whole = relay.turns
        step = Step(saver, fenced=kind != "postgres")
        for _ in range(8):  # every pooled connection has prepared each statement
            step.put_writes(step.put())
            saver.get_tuple({"configurable": {"thread_id": step.conf["thread_id"]}})
        relay.reset()
        saved = step.put()
        put = relay.turns
        relay.reset()
        step.put_writes(saved)
        writes = relay.turns
        relay.reset()
        saver.get_tuple({"configurable": {"thread_id": step.conf["thread_id"]}})
        read = relay.turns
    return {"put": put, "put_writes": writes, "get_tuple": read, "run": whole / NODES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of the graph per saver")
    args = parser.parse_args()
    import django

    django.setup()

    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    database_ensure(url)
    parts = urlsplit(url)
    relay = Relay(parts.hostname or "127.0.0.1", parts.port or 5432)
    relayed = _conninfo(url, port=relay.port)

    from langgraph.checkpoint.memory import InMemorySaver

    tmp = tempfile.TemporaryDirectory(prefix="bench-checkpointer-")
    kinds = ("memory", "postgres", "fenced", "fast", "sqlite")
    fence = {"memory": False, "postgres": False, "fenced": True, "fast": True, "sqlite": True}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    with (
        postgres_saver("postgres", url) as pg,
        postgres_saver("fenced", url) as fenced,
        postgres_saver("fast", url) as fast,
        sqlite_saver(Path(tmp.name) / "checkpoints.sqlite3") as lite,
    ):
        savers = {"postgres": pg, "fenced": fenced, "fast": fast, "sqlite": lite}
        graphs = {"memory": graph_build(InMemorySaver())}
        graphs.update({kind: graph_build(saver) for kind, saver in savers.items()})
        for kind in kinds:  # warm-up: imports, pool connections, prepared statements
            for _ in range(3):
                run_once(graphs[kind], fenced=fence[kind])
        for _ in range(args.runs):
            for kind in kinds:  # interleaved, so a busy machine slows each alike
                times[kind].append(run_once(graphs[kind], fenced=fence[kind]) * 1000 / NODES)
        calls = calls_ms(savers, args.runs * 10)
    tmp.cleanup()
    anchor = insert_commit_ms(url, max(200, args.runs * 10))
    step = {kind: statistics.median(values) for kind, values in times.items()}
    bare = step["memory"]
    labels = {
        "postgres": "PostgresSaver alone (no fence)",
        "fenced": "FencedPostgresSaver (CHECKPOINTER=postgres)",
        "fast": "FastPostgresSaver (CHECKPOINTER=fast)",
        "sqlite": "FencedSqliteSaver (SQLite default)",
    }

    section(f"checkpointer per step ({NODES}-node graph, ~2 KB state, median of {args.runs} runs)")
    figure("step, bare graph + InMemorySaver", bare, "ms", anchor=("INSERT+COMMIT", anchor))
    for kind, label in labels.items():
        figure(f"step, {label}", step[kind], "ms", anchor=("bare graph", bare))
    for kind, label in labels.items():
        figure(
            f"overhead per step, {label}",
            step[kind] - bare,
            "ms",
            anchor=("INSERT+COMMIT", anchor),
            goal="<= 3 ms",
        )

    section(f"saver calls of one step (4 channels, median of {args.runs * 10})")
    for kind, label in labels.items():
        put, writes, read = calls[kind]
        short = label.split(" (")[0]
        figure(f"put, {short}", put, "ms", anchor=("INSERT+COMMIT", anchor))
        figure(f"put_writes, {short}", writes, "ms", anchor=("INSERT+COMMIT", anchor))
        figure(f"get_tuple of the head, {short}", read, "ms", anchor=("INSERT+COMMIT", anchor))

    section("round trips to Postgres (counted on the wire: a send after the server answered)")
    for kind in ("postgres", "fenced", "fast"):
        counted = turns_counted(relay, kind, relayed)
        short = labels[kind].split(" (")[0]
        one = ("INSERT+COMMIT", 1.0)
        figure(f"put, {short}", counted["put"], "trips", anchor=one)
        figure(f"put_writes, {short}", counted["put_writes"], "trips", anchor=one)
        figure(f"get_tuple of the head, {short}", counted["get_tuple"], "trips", anchor=one)
        figure(f"whole run per step, {short}", counted["run"], "trips", anchor=one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
