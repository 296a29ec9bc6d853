"""The incident copilot graph: proposal by severity and deploys, the gate, and each decision."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from pydantic import ValidationError

from agents.graphs.incident_copilot.graph import build, route_after_approval
from agents.models import Effect, SandboxDeploy, SandboxNotification, SandboxTicket
from agents.runtime.registry import agent_get
from agents.sandbox import systems as sandbox
from approvals.models import AgentRun
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(alice) -> AgentRun:
    return RunFactory(agent="incident_copilot", requested_by=alice)


@pytest.fixture
def graph():
    return build(checkpointer=InMemorySaver())


def config(run: AgentRun) -> dict:
    return {"configurable": {"thread_id": run.thread_id}}


def start(graph, run: AgentRun, **incident):
    incident = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev1", **incident}
    graph.invoke(incident, config(run), durability="sync")
    return graph.get_state(config(run)).interrupts


def answer(graph, run: AgentRun, interrupt, **value):
    value = {"args": {}, "message": "", "by": "bob", "approval_id": None, **value}
    return graph.invoke(Command(resume={interrupt.id: value}), config(run), durability="sync")


def recent_checkout_deploy() -> SandboxDeploy:
    return sandbox.deploy_record(
        service="checkout",
        version="v42",
        previous_version="v41",
        deployed_at=timezone.now() - dt.timedelta(minutes=20),
    )


def test_sev1_after_a_recent_deploy_proposes_a_critical_rollback(run, graph):
    recent_checkout_deploy()
    (interrupt,) = start(graph, run, severity="sev1")
    payload = interrupt.value
    assert payload["tool"] == "rollback_deploy"
    assert payload["tier"] == "critical"
    assert payload["args"] == {"service": "checkout", "from_version": "v42", "to_version": "v41"}
    assert "v42 to v41" in payload["blast_radius"]
    assert any("deploy v42" in line for line in payload["evidence"])
    assert payload["run_url"].endswith(f"/runs/{run.thread_id}/")


def test_sev3_proposes_a_write_tier_ticket_even_after_a_deploy(run, graph):
    recent_checkout_deploy()
    (interrupt,) = start(graph, run, severity="sev3")
    assert interrupt.value["tool"] == "create_incident_ticket"
    assert interrupt.value["tier"] == "write"
    assert interrupt.value["args"]["severity"] == "sev3"


def test_sev1_without_a_deploy_in_the_last_day_proposes_a_ticket(run, graph):
    sandbox.deploy_record(
        service="checkout",
        version="v40",
        previous_version="v39",
        deployed_at=timezone.now() - dt.timedelta(hours=30),
    )
    (interrupt,) = start(graph, run, severity="sev1")
    assert interrupt.value["tool"] == "create_incident_ticket"


def test_nothing_happens_before_the_decision(run, graph):
    start(graph, run, severity="sev3")
    assert not Effect.objects.exists()
    assert not SandboxTicket.objects.exists()
    assert not SandboxNotification.objects.exists()


def test_the_gate_payload_is_the_same_when_the_pause_is_read_again(run, graph):
    (first,) = start(graph, run, severity="sev3")
    (again,) = graph.get_state(config(run)).interrupts
    assert again.id == first.id
    assert again.value == first.value


def test_approve_rolls_back_once_and_notifies_the_channel(run, graph):
    recent_checkout_deploy()
    (interrupt,) = start(graph, run, severity="sev1")
    answer(graph, run, interrupt, decision="approve")
    state = graph.get_state(config(run))
    assert state.next == ()
    assert state.values["outcome"]["status"] == "executed"
    current = sandbox.deploy_current(service="checkout")
    assert (current.version, current.is_rollback) == ("v41", True)
    effect = Effect.objects.get(tool="rollback_deploy")
    assert effect.key == f"{run.thread_id}:{state.values['proposal']['tool_call_id']}"
    assert effect.status == Effect.Status.SUCCEEDED
    (note,) = SandboxNotification.objects.all()
    assert "rollback_deploy" in note.message


def test_edit_executes_the_edited_args(run, graph):
    (interrupt,) = start(graph, run, severity="sev3")
    edited = {**interrupt.value["args"], "title": "checkout errors, edited by bob"}
    answer(graph, run, interrupt, decision="edit", args=edited)
    (ticket,) = SandboxTicket.objects.all()
    assert ticket.title == "checkout errors, edited by bob"
    effect = Effect.objects.get(tool="create_incident_ticket")
    assert effect.args == edited


def test_reject_never_executes_and_says_so_in_the_channel(run, graph):
    (interrupt,) = start(graph, run, severity="sev3")
    answer(graph, run, interrupt, decision="reject", message="duplicate of TICKET-7")
    assert not SandboxTicket.objects.exists()
    assert not Effect.objects.filter(tool="create_incident_ticket").exists()
    state = graph.get_state(config(run))
    assert state.values["outcome"]["status"] == "rejected"
    (note,) = SandboxNotification.objects.all()
    assert "rejected by bob" in note.message and "duplicate of TICKET-7" in note.message


def test_respond_records_the_message_and_does_not_execute(run, graph):
    (interrupt,) = start(graph, run, severity="sev3")
    answer(graph, run, interrupt, decision="respond", message="already handled by the SRE team")
    assert not SandboxTicket.objects.exists()
    outcome = graph.get_state(config(run)).values["outcome"]
    assert outcome == {
        "status": "responded",
        "tool": "create_incident_ticket",
        "by": "bob",
        "message": "already handled by the SRE team",
    }


def test_resuming_twice_creates_one_ticket(run, graph):
    (interrupt,) = start(graph, run, severity="sev3")
    answer(graph, run, interrupt, decision="approve")
    answer(graph, run, interrupt, decision="approve")
    assert SandboxTicket.objects.count() == 1
    assert Effect.objects.filter(tool="create_incident_ticket").count() == 1


def test_a_replayed_execute_step_creates_one_ticket(run, graph):
    (interrupt,) = start(graph, run, severity="sev3")
    answer(graph, run, interrupt, decision="approve")
    # Re-run execute from the checkpoint before it, as a worker would after dying mid-step.
    before_execute = next(s for s in graph.get_state_history(config(run)) if s.next == ("execute",))
    graph.invoke(None, before_execute.config, durability="sync")
    assert SandboxTicket.objects.count() == 1
    assert SandboxNotification.objects.count() == 1


def test_works_on_a_sqlite_checkpointer(run, tmp_path):
    with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite3")) as saver:
        graph = build(checkpointer=saver)
        (interrupt,) = start(graph, run, severity="sev3")
        answer(graph, run, interrupt, decision="approve")
        assert graph.get_state(config(run)).values["outcome"]["status"] == "executed"
    assert SandboxTicket.objects.count() == 1


def test_router_refuses_an_unknown_decision():
    with pytest.raises(ValueError, match="unexpected decision"):
        route_after_approval({"decision": {"decision": "maybe"}})


def test_input_validation_names_the_field():
    spec = agent_get("incident_copilot")
    with pytest.raises(ValidationError, match="severity"):
        spec.validate_input({"service": "checkout", "signal": "down", "severity": "sev9"})
    assert spec.validate_input(spec.example_input) == spec.example_input
