"""The refund agent: create_agent + the gate middleware, and the refund saga."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from pydantic import ValidationError

from agents.graphs.refund_agent.graph import build, make_input
from agents.models import (
    Effect,
    SandboxInventoryMovement,
    SandboxNotification,
    SandboxPayment,
)
from agents.runtime.registry import agent_get
from approvals.models import AgentRun, ApprovalRequest
from audit.models import AuditEvent
from tests.support.factories import ApprovalFactory, RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {
    "order_id": "A-1001",
    "amount": "49.90",
    "reason": "arrived damaged",
    "sku": "MUG-BLUE",
    "quantity": 2,
    "customer_email": "pat@example.com",
}


@pytest.fixture
def run(alice) -> AgentRun:
    return RunFactory(agent="refund_agent", requested_by=alice)


@pytest.fixture
def graph():
    return build(checkpointer=InMemorySaver())


def config(run: AgentRun) -> dict:
    return {"configurable": {"thread_id": run.thread_id}}


def start(graph, run: AgentRun, **overrides):
    run_input = agent_get("refund_agent").validate_input({**REQUEST, **overrides})
    graph.invoke(make_input(run_input), config(run), durability="sync")
    return graph.get_state(config(run)).interrupts


def answer(graph, run: AgentRun, interrupt, **value):
    value = {"args": {}, "message": "", "by": "bob", "approval_id": None, **value}
    return graph.invoke(Command(resume={interrupt.id: value}), config(run), durability="sync")


def tool_messages(graph, run: AgentRun) -> list[ToolMessage]:
    messages = graph.get_state(config(run)).values["messages"]
    return [m for m in messages if isinstance(m, ToolMessage)]


def test_refund_pauses_at_the_gate_with_the_requested_args(run, graph):
    (interrupt,) = start(graph, run)
    payload = interrupt.value
    assert payload["tool"] == "refund_order"
    assert payload["tier"] == "write"
    assert payload["args"]["amount"] == "49.90"
    assert payload["args"]["order_id"] == "A-1001"
    assert "Refunds 49.90 USD on order A-1001" in payload["blast_radius"]
    assert not Effect.objects.exists()
    assert not SandboxPayment.objects.exists()


def test_approve_runs_the_saga_across_payment_inventory_and_notification(run, graph):
    (interrupt,) = start(graph, run)
    answer(graph, run, interrupt, decision="approve")
    (payment,) = SandboxPayment.objects.all()
    assert (payment.kind, payment.amount) == ("refund", Decimal("-49.90"))
    (movement,) = SandboxInventoryMovement.objects.all()
    assert (movement.sku, movement.delta) == ("MUG-BLUE", 2)
    (email,) = SandboxNotification.objects.all()
    assert email.recipient == "pat@example.com"
    (message,) = tool_messages(graph, run)
    outcome = json.loads(message.content)
    assert outcome["status"] == "refunded"
    keys = list(Effect.objects.order_by("id").values_list("key", flat=True))
    prefix = f"{run.thread_id}:{message.tool_call_id}"
    assert keys == [f"{prefix}:payment", f"{prefix}:inventory", f"{prefix}:notification"]
    assert Effect.objects.filter(status=Effect.Status.SUCCEEDED).count() == 3
    assert graph.get_state(config(run)).next == ()


def test_edit_refunds_the_edited_amount(run, graph):
    (interrupt,) = start(graph, run)
    answer(
        graph, run, interrupt, decision="edit", args={**interrupt.value["args"], "amount": "20.00"}
    )
    (payment,) = SandboxPayment.objects.all()
    assert payment.amount == Decimal("-20.00")
    assert Effect.objects.get(tool="refund_payment").args["amount"] == "20.00"


def test_reject_moves_no_money(run, graph):
    (interrupt,) = start(graph, run)
    answer(graph, run, interrupt, decision="reject", message="outside the return window")
    assert not Effect.objects.exists()
    assert not SandboxPayment.objects.exists()
    (message,) = tool_messages(graph, run)
    assert message.status == "error"
    assert "outside the return window" in message.content


def test_respond_moves_no_money_and_answers_the_model(run, graph):
    (interrupt,) = start(graph, run)
    answer(graph, run, interrupt, decision="respond", message="offer store credit instead")
    assert not SandboxPayment.objects.exists()
    (message,) = tool_messages(graph, run)
    assert message.content == "offer store credit instead"


def test_resuming_twice_refunds_once(run, graph):
    (interrupt,) = start(graph, run)
    answer(graph, run, interrupt, decision="approve")
    answer(graph, run, interrupt, decision="approve")
    assert SandboxPayment.objects.count() == 1
    assert Effect.objects.count() == 3


def test_failing_last_step_compensates_earlier_steps_in_reverse_once(run, graph):
    (interrupt,) = start(graph, run, customer_email="pat@example.invalid")
    answer(graph, run, interrupt, decision="approve")
    (message,) = tool_messages(graph, run)
    prefix = f"{run.thread_id}:{message.tool_call_id}"
    outcome = json.loads(message.content)
    assert outcome["status"] == "rolled_back"
    assert outcome["failed_step"] == "notification"
    assert outcome["compensated"] == [
        f"{prefix}:inventory:compensate",
        f"{prefix}:payment:compensate",
    ]
    statuses = dict(Effect.objects.values_list("key", "status"))
    assert statuses == {
        f"{prefix}:payment": "compensated",
        f"{prefix}:inventory": "compensated",
        f"{prefix}:notification": "failed",
        f"{prefix}:inventory:compensate": "succeeded",
        f"{prefix}:payment:compensate": "succeeded",
    }
    # Reverse order: the restock is undone before the refund is taken back.
    compensations = list(
        Effect.objects.filter(compensates__isnull=False)
        .order_by("id")
        .values_list("tool", flat=True)
    )
    assert compensations == ["unrestock_inventory", "reverse_refund_payment"]
    assert sorted(SandboxPayment.objects.values_list("amount", flat=True)) == [
        Decimal("-49.90"),
        Decimal("49.90"),
    ]
    assert sorted(SandboxInventoryMovement.objects.values_list("delta", flat=True)) == [-2, 2]
    assert not SandboxNotification.objects.exists()
    assert AuditEvent.objects.filter(action="effect.compensated").count() == 2

    # A second resume and a replay of the tools step compensate nothing again.
    answer(graph, run, interrupt, decision="approve")
    before_tools = next(s for s in graph.get_state_history(config(run)) if s.next == ("tools",))
    graph.invoke(None, before_tools.config, durability="sync")
    assert SandboxPayment.objects.count() == 2
    assert SandboxInventoryMovement.objects.count() == 2
    assert AuditEvent.objects.filter(action="effect.compensated").count() == 2


def test_failing_middle_step_compensates_only_the_payment(run, graph):
    (interrupt,) = start(graph, run, sku="DISCONTINUED-MUG")
    answer(graph, run, interrupt, decision="approve")
    (message,) = tool_messages(graph, run)
    assert json.loads(message.content)["failed_step"] == "inventory"
    assert Effect.objects.get(tool="refund_payment").status == "compensated"
    assert not SandboxInventoryMovement.objects.exists()
    assert SandboxPayment.objects.filter(kind="refund_reversal").count() == 1


def test_works_on_a_sqlite_checkpointer(run, tmp_path):
    with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite3")) as saver:
        graph = build(checkpointer=saver)
        (interrupt,) = start(graph, run)
        answer(graph, run, interrupt, decision="approve")
        assert graph.get_state(config(run)).next == ()
    assert SandboxPayment.objects.count() == 1


def test_input_validation_names_the_field():
    with pytest.raises(ValidationError, match="amount"):
        agent_get("refund_agent").validate_input({**REQUEST, "amount": "-5"})


def test_saga_steps_are_bound_to_the_approval_whose_args_they_execute(run, graph):
    (interrupt,) = start(graph, run)
    approval = ApprovalFactory(
        run=run,
        interrupt_id=interrupt.id,
        tool="refund_order",
        args=interrupt.value["args"],
        payload=interrupt.value,
        tier="write",
        status=ApprovalRequest.Status.APPROVED,
        decision={"decision": "approve", "by": "bob"},
    )
    answer(graph, run, interrupt, decision="approve", approval_id=approval.pk)
    assert set(Effect.objects.values_list("approval_id", flat=True)) == {approval.pk}
    assert SandboxPayment.objects.count() == 1
