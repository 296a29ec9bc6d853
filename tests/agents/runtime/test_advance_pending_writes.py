"""A step's writes were saved on the head checkpoint but the checkpoint that closes the step was
not (a SIGKILL between the two, or the lease guard refusing the second). LangGraph's live
``get_state().next`` is then empty (a task with saved writes counts as finished, and the tasks
its writes trigger appear only with the closing checkpoint), so the next advance must not take
the thread for finished: it drives on, LangGraph applies the saved writes without re-running
their task, and the rest of the graph runs. (Seen in the chaos test: a completed rollback run
without its notify_channel effect.)"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents.models import Effect
from agents.runtime import advance
from agents.runtime.checkpoint import checkpointer_get, thread_config
from agents.runtime.lease import LeaseLost
from agents.sandbox import systems as sandbox
from agents.services import run_start
from approvals.models import AgentRun
from approvals.services import approval_decide

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_advance_after_a_lost_closing_checkpoint_runs_the_rest_of_the_graph(
    alice, carol, monkeypatch
):
    sandbox.deploy_record(
        service="checkout",
        version="v42",
        previous_version="v41",
        deployed_at=timezone.now() - dt.timedelta(minutes=20),
    )
    run = run_start(
        agent="incident_copilot",
        input={"service": "checkout", "signal": "5xx above 5%", "severity": "sev1"},
        user=alice,
    )
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    assert approval.tool == "rollback_deploy"
    approval_decide(
        approval=approval, user=carol, decision="approve", seen_hash=approval.payload_hash
    )

    saver_class = type(checkpointer_get())
    original_put = saver_class.put
    refused: list[int] = []

    def put(self, config, checkpoint, metadata, new_versions):
        # The checkpoint that closes the execute step: "outcome" is new, "notification" is not.
        known = checkpoint.get("channel_versions", {})
        if "outcome" in new_versions and "notification" not in known and not refused:
            refused.append(metadata.get("step"))
            raise LeaseLost()  # what the guard raises; a SIGKILL here leaves the same rows
        return original_put(self, config, checkpoint, metadata, new_versions)

    monkeypatch.setattr(saver_class, "put", put)
    assert advance.run_advance(run_id=run.id).startswith("stopped")
    assert refused
    head = checkpointer_get().get_tuple(thread_config(AgentRun.objects.get(pk=run.pk)))
    assert {write[1] for write in head.pending_writes} >= {"outcome"}  # saved, not applied

    assert advance.run_advance(run_id=run.id) == "completed"
    run.refresh_from_db()
    tools = sorted(Effect.objects.filter(run=run).values_list("tool", flat=True))
    assert tools == ["notify_channel", "rollback_deploy"]  # each once: execute not re-run
    assert {"notification", "summary"} <= set(run.output)
