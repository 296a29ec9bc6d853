"""django-q2 keeps a task's result in the clear (django_q_task.result) and logs it, and neither
is reached by erasure: an advance's outcome and its log lines name the exception's type and the
run, never the exception's message (it may quote the run's data)."""

from __future__ import annotations

import logging

import pytest
from django_q.models import Success, Task
from django_q.tasks import async_task

from agents.effects import ledger
from agents.effects.errors import RetryableToolError, ToolError
from agents.runtime.registry import agent_unregister
from agents.services import run_start
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun
from tests.support.pay_agents import ADVANCE_TASK, pay_agent_register
from tests.support.providers import PayArgs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

SECRET = "grace.hopper+7c1e@example.test"


@pytest.fixture
def leaky(settings, monkeypatch):
    """An agent whose one tool fails with the customer's address in its message."""
    settings.TOOL_MAX_RETRIES = 1  # the ledger retries once (and logs the retry) first
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    raised: list[Exception] = []

    def run(args, key):
        raise raised[0]

    tool_register(
        ToolSpec(name="leaky_pay", description="pay", args_model=PayArgs, tier="write", run=run)
    )
    spec = pay_agent_register("leaky_pay")
    yield spec, raised
    agent_unregister(spec.name)
    tool_unregister("leaky_pay")


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (ToolError(f"card of {SECRET} declined"), "dead: ToolError"),
        (RetryableToolError(f"503 while paying for {SECRET}"), "retrying in"),
    ],
)
def test_a_failed_run_leaves_no_error_text_in_task_results(leaky, alice, caplog, error, outcome):
    spec, raised = leaky
    raised.append(error)
    run = run_start(agent=spec.name, input={"amount": 5}, user=alice)
    caplog.set_level(logging.DEBUG)
    async_task(ADVANCE_TASK, str(run.id), sync=True)

    run.refresh_from_db()
    assert SECRET in run.error  # the run keeps it (sealed with the run), for its reviewers
    (task,) = Task.objects.all()
    assert task.success and Success.objects.filter(pk=task.pk).exists()
    assert str(task.result).startswith(outcome) and str(run.id) in str(task.result)
    assert SECRET not in str(task.result) and SECRET not in str(task.args)
    assert caplog.records and f"run {run.id}" in caplog.text
    assert SECRET not in caplog.text
    for record in caplog.records:
        assert SECRET not in record.getMessage()
        assert record.exc_info is None or SECRET not in str(record.exc_info[1])
    if outcome == "retrying in":
        assert run.status == AgentRun.Status.QUEUED
        assert any("RetryableToolError" in r.getMessage() for r in caplog.records)
