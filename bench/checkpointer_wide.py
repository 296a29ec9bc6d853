"""A wide state on Postgres: what a step costs when it changes one of many primitive channels.

PostgresSaver keeps str/int/float/bool channel values inline; ours seals each one into a blob
(``agents/runtime/at_rest.py``). This measures that a step pays for the channels it changed,
not for every unchanged one: LangGraph's PostgresSaver (unencrypted, the control) against
FastPostgresSaver (sealed), interleaved, on a scratch schema of BENCH_DATABASE_URL.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_checkpointer \\
        .venv/bin/python bench/checkpointer_wide.py --channels 100
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

STEPS = 6


def graph_build(saver: Any, channels: int) -> Any:
    from langgraph.graph import END, START, StateGraph

    state = TypedDict("State", {f"f{i}": str for i in range(channels)}, total=False)  # type: ignore[misc]
    builder = StateGraph(state)
    previous = START
    for step in range(STEPS):
        name = f"n{step}"
        builder.add_node(name, lambda s, step=step: {f"f{step % channels}": f"v{step}" + "x" * 40})
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder.compile(checkpointer=saver)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args()
    import django

    django.setup()
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from agents.runtime import checkpoint
    from agents.runtime.fast_saver import FastPostgresSaver

    url = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    schema = f"bench_wide_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    conninfo = psycopg.conninfo.make_conninfo(url, options=f"-c search_path={schema}")
    try:
        checkpoint.postgres_setup(conninfo)
        kwargs = {"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0}
        with ConnectionPool(conninfo, min_size=1, max_size=4, kwargs=kwargs) as pool:
            graphs = {
                "PostgresSaver (control)": graph_build(PostgresSaver(pool), args.channels),
                "FastPostgresSaver (sealed)": graph_build(FastPostgresSaver(pool), args.channels),
            }
            start = {f"f{i}": f"initial {i}" for i in range(args.channels)}
            per_step: dict[str, list[float]] = {name: [] for name in graphs}
            for run in range(args.runs):
                for name, graph in graphs.items():
                    config = {"configurable": {"thread_id": f"{name}-{run}"}}
                    began = time.perf_counter()
                    graph.invoke(start, config, durability="sync")
                    per_step[name].append((time.perf_counter() - began) / (STEPS + 2) * 1e3)
        control = statistics.median(per_step["PostgresSaver (control)"])
        for name, times in per_step.items():
            median = statistics.median(times)
            print(f"{name}: {median:.2f} ms per step, {median / control:.2f}x the control")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
