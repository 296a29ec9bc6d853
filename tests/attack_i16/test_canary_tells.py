"""Attack: a reviewer tells a pending canary from a real approval before deciding it. Each test
compares a canary with a real refund run paused at its gate (the offline demo model), as bob,
a reviewer of tier write, sees both."""

from __future__ import annotations

import pytest

from agents.runtime import advance
from agents.services import run_start
from approvals.autonomy_models import AutonomyRule
from approvals.models import AgentRun, ApprovalRequest
from tests.approvals.canary_support import plant, policy_seeded
from tests.support.people import client_for, rest_client_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

REFUND = {
    "order_id": "A-1001",
    "amount": "49.90",
    "reason": "arrived damaged",
    "sku": "MUG-BLUE",
    "quantity": 1,
    "customer_email": "customer@example.com",
}


@pytest.fixture
def demo_policy(alice, bob, carol, dave) -> dict:
    return policy_seeded({"bob": bob, "carol": carol})


@pytest.fixture
def real(demo_policy, alice) -> ApprovalRequest:
    """A real refund run of alice's, paused at its gate."""
    run = run_start(agent="refund_agent", input=REFUND, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    return run.approvals.get()


def test_a_pending_canarys_run_has_used_steps_and_tokens_as_a_real_paused_run_has(real, bob):
    canary = plant("refund_doubled_amount")
    api = rest_client_for(bob)
    real_run = api.get(f"/api/runs/{real.run_id}/").json()
    fake_run = api.get(f"/api/runs/{canary.run_id}/").json()
    assert real_run["steps_used"] > 0 and real_run["tokens_used"] > 0
    assert fake_run["steps_used"] > 0 and fake_run["tokens_used"] > 0


def test_a_pending_canarys_run_page_lists_steps_as_a_real_paused_runs_page_does(real, bob):
    canary = plant("refund_doubled_amount")
    pages = client_for(bob)
    assert "No steps recorded yet" not in pages.get(f"/runs/{real.run_id}/").content.decode()
    assert "No steps recorded yet" not in pages.get(f"/runs/{canary.run_id}/").content.decode()


def test_a_canary_of_a_default_plan_appears_to_come_from_someone_who_requests_real_runs(real, bob):
    canary = plant("refund_unknown_account")
    real_requesters = set(
        AgentRun.objects.exclude(pk=canary.run_id).values_list("requested_by__username", flat=True)
    )
    queue = client_for(bob).get("/").content.decode()
    fake_requester = AgentRun.objects.get(pk=canary.run_id).requested_by.get_username()
    assert fake_requester in queue  # the queue's "Requested by" column names it
    assert fake_requester in real_requesters  # "agent-requests" requests nothing real


def test_a_canarys_interrupt_id_is_the_one_langgraph_gave_its_pause_as_a_real_ones_is(real, bob):
    # A made-up id (uuid4().hex: "4" at index 12, 8/9/a/b at 16) would be a tell; the canary's
    # id must be the pending interrupt's own, read back from its thread's saved state.
    from agents.runtime.checkpoint import graph_for, thread_config
    from agents.runtime.registry import agent_get

    canary = plant("refund_doubled_amount")
    api = rest_client_for(bob)
    for approval_id in (canary.approval_id, real.pk):
        approval = ApprovalRequest.objects.select_related("run").get(pk=approval_id)
        graph = graph_for(agent_get(approval.run.agent))
        pending = {i.id for i in graph.get_state(thread_config(approval.run)).interrupts}
        shown = api.get(f"/api/approvals/{approval_id}/").json()["interrupt_id"]
        assert shown == approval.interrupt_id
        assert shown in pending


def test_a_canarys_rationale_reads_as_the_agent_writes_it_for_the_same_input(real, bob):
    canary = plant("refund_doubled_amount")
    fake = ApprovalRequest.objects.get(pk=canary.approval_id)
    # The agent writes "The customer asks for <amount> back on order <id> because: ...".
    assert real.payload["rationale"].startswith("The customer asks for ")
    assert fake.payload["rationale"].startswith("The customer asks for ")


def test_no_canary_waits_in_a_queue_where_its_tools_real_calls_never_wait(demo_policy, bob):
    # rollback_deploy can be undone: compliance's admin gives it post-hoc autonomy, so every
    # real rollback runs without waiting; a pending rollback approval is then a canary.
    AutonomyRule.objects.create(tool="rollback_deploy", mode=AutonomyRule.Mode.POST_HOC)
    from approvals.services.canaries import CanaryRefused
    from tests.approvals.canary_support import plan_for

    with pytest.raises(CanaryRefused):
        plant("rollback_wrong_service", tier="critical", plan=plan_for("critical"))
