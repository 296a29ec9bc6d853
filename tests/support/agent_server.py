"""A real local LangGraph Agent Server (``langgraph dev`` from ``langgraph-cli[inmem]``) for the
connector tests, serving tests/fixtures/agent_server/graph.py: ``create_agent`` with a scripted
model and LangChain's HumanInTheLoopMiddleware on ``issue_refund``, which records each call it
makes in a JSON-lines file.

The server runs from its own venv (``make agent-server`` builds ``.venv-agent-server``;
``AGENT_SERVER_VENV`` points elsewhere): langgraph-api's pins clash with the console's test
dependencies. No network: tracing off, no API key.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from langgraph_sdk import get_sync_client

from tests.support.processes import ManagedProcess, free_port, wait_http_ready

FIXTURE = Path(settings.BASE_DIR) / "tests" / "fixtures" / "agent_server"
GRAPH_ID = "refunds"
# Variables the server must not see: no tracing, no key that could reach a hosted service.
_DROPPED = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_API_KEY", "LANGSMITH_ENDPOINT")


@dataclass
class AgentServer:
    url: str
    calls_file: Path
    process: ManagedProcess

    def client(self) -> Any:
        return get_sync_client(url=self.url, api_key=None)

    def calls(self) -> list[dict[str, Any]]:
        """The refunds the graph really issued, in order."""
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines() if line]

    def start_thread(self, **refund: Any) -> str:
        """A new thread asking for ``refund``; returns once it is interrupted (or finished)."""
        client = self.client()
        thread = client.threads.create()
        message = {"role": "user", "content": json.dumps(refund)}
        client.runs.wait(thread["thread_id"], GRAPH_ID, input={"messages": [message]})
        return str(thread["thread_id"])


def _langgraph() -> Path:
    venv = Path(
        os.environ.get("AGENT_SERVER_VENV") or Path(settings.BASE_DIR) / ".venv-agent-server"
    )
    return venv / "bin" / "langgraph"


@contextlib.contextmanager
def agent_server_running(tmp_path: Path) -> Iterator[AgentServer]:
    """A fresh server (empty in-memory state) on a free port, killed on exit."""
    langgraph = _langgraph()
    if not langgraph.exists():
        pytest.fail(f"{langgraph} is missing: run `make agent-server` (it installs langgraph-cli)")
    workdir = tmp_path / "agent_server"
    workdir.mkdir()
    for name in ("graph.py", "langgraph.json"):
        shutil.copy(FIXTURE / name, workdir / name)
    calls = workdir / "refunds.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k not in _DROPPED}
    env.update(
        REFUND_CALLS_FILE=str(calls),
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",  # the CLI posts usage analytics otherwise
        PYTHONUNBUFFERED="1",
    )
    port = free_port()
    process = ManagedProcess(
        name="agent-server",
        command=[
            str(langgraph),
            "dev",
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--config",
            "langgraph.json",
        ],
        env=env,
        log_path=tmp_path / "agent_server.log",
        cwd=workdir,
    )
    process.start()
    try:
        wait_http_ready(f"http://127.0.0.1:{port}/ok", timeout=60.0, process=process)
        yield AgentServer(url=f"http://127.0.0.1:{port}", calls_file=calls, process=process)
    finally:
        process.kill(signal.SIGTERM, timeout=10.0)
