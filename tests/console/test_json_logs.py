"""LOG_FORMAT=json: one JSON object a line, carrying the run and thread ids while a run advances."""

from __future__ import annotations

import copy
import io
import json
import logging
import logging.config
import os
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest
from django.conf import settings
from langgraph.graph import END, START, StateGraph

from agents.runtime import advance
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import run_start

ROOT = Path(__file__).resolve().parents[2]
node_log = logging.getLogger("tests.json_logs.node")


class LogState(TypedDict, total=False):
    said: str


def _say(state: LogState) -> dict:
    node_log.warning("the node ran")
    return {"said": "yes"}


def build_logging_graph(*, checkpointer=None):
    builder = StateGraph(LogState)
    builder.add_node("say", _say)
    builder.add_edge(START, "say")
    builder.add_edge("say", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
def logging_agent():
    spec = agent_register(AgentSpec(name="logging_agent", version="1", factory=build_logging_graph))
    yield spec
    agent_unregister("logging_agent")


@pytest.fixture
def json_lines():
    """The console's logging as LOG_FORMAT=json configures it, written to a buffer."""
    stream = io.StringIO()
    config = copy.deepcopy(settings.LOGGING)
    config["handlers"]["console"].update(formatter="json", stream=stream)
    logging.config.dictConfig(config)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line]
    finally:
        logging.config.dictConfig(settings.LOGGING)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("queued")
def test_a_line_logged_inside_an_advance_carries_the_run_and_thread_ids(
    logging_agent, alice, json_lines
):
    run = run_start(agent="logging_agent", input={}, user=alice)
    assert advance.run_advance(run_id=run.id) == "completed"
    node_log.warning("after the advance")
    lines = json_lines()
    (inside,) = [line for line in lines if line["message"] == "the node ran"]
    assert inside["run_id"] == str(run.id)
    assert inside["thread_id"] == run.thread_id
    assert inside["level"] == "WARNING"
    assert inside["logger"] == "tests.json_logs.node"
    (outside,) = [line for line in lines if line["message"] == "after the advance"]
    assert outside["run_id"] == "" and outside["thread_id"] == ""


SCRIPT = """
import django, logging
django.setup()
from core.logcontext import run_log_context
with run_log_context(run_id="run-1", thread_id="thread-1"):
    logging.getLogger("agents.example").warning("inside")
logging.getLogger("agents.example").warning("outside")
"""


def _django(script: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **env, "DJANGO_SETTINGS_MODULE": "console.settings"}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_log_format_json_switches_the_console_to_json_lines():
    result = _django(SCRIPT, LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr
    inside, outside = (json.loads(line) for line in result.stderr.strip().splitlines()[-2:])
    assert (inside["message"], inside["run_id"], inside["thread_id"]) == (
        "inside",
        "run-1",
        "thread-1",
    )
    assert (outside["message"], outside["run_id"]) == ("outside", "")
    assert {"time", "level", "logger"} <= set(inside)


def test_log_format_plain_stays_plain_text():
    result = _django(SCRIPT, LOG_FORMAT="plain")
    assert result.returncode == 0, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.endswith("WARNING agents.example outside")
    assert not last.startswith("{")


def test_a_bad_log_format_stops_start_up_naming_the_variable():
    result = _django("import django; django.setup()", LOG_FORMAT="xml")
    assert result.returncode != 0
    assert "LOG_FORMAT" in result.stderr.splitlines()[-1]


def test_a_lower_case_log_level_is_read_and_a_bad_one_names_the_variable():
    lower = _django(
        "import django, logging; django.setup(); print(logging.getLogger().level)",
        LOG_LEVEL="debug",
    )
    assert lower.returncode == 0, lower.stderr
    assert lower.stdout.strip() == str(logging.DEBUG)

    bad = _django("import django; django.setup()", LOG_LEVEL="verbose")
    assert bad.returncode != 0
    assert "LOG_LEVEL" in bad.stderr.splitlines()[-1]
