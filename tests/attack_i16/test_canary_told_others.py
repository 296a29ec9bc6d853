"""Attack: only the decider is to be told a canary was a test (docs/autonomy_canaries.md: carol,
who did not decide it, "might tell the next reviewer"). The run page and the runs API tell
every reviewer anyway: the run completes with output {"canary": true} and its run.completed
event carries {"canary": true}."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from tests.approvals.canary_support import plant, policy_seeded
from tests.support.approvals import decide
from tests.support.people import client_for, rest_client_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("queued")]


@pytest.fixture
def decided(alice, bob, carol, dave):
    policy_seeded({"bob": bob, "carol": carol})
    canary = plant("refund_unknown_account")
    decide(ApprovalRequest.objects.get(pk=canary.approval_id), bob, "approve")
    return canary


def test_another_reviewer_does_not_learn_from_the_runs_api_that_it_was_a_canary(decided, carol):
    body = rest_client_for(carol).get(f"/api/runs/{decided.run_id}/").json()
    assert "canary" not in str(body).lower()


def test_another_reviewer_does_not_learn_from_the_run_page_that_it_was_a_canary(decided, carol):
    page = client_for(carol).get(f"/runs/{decided.run_id}/").content.decode()
    assert "canary" not in page.lower()
