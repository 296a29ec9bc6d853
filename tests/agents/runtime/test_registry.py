"""Agents of the CONSOLE_AGENTS setting: one that cannot be imported is named in the errors and
flags its runs; it never hides the others or kills a run (found by the hostile review)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.runtime import advance, registry
from agents.services import RunInputInvalid, run_start
from approvals.models import AgentRun
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def broken_and_fine(settings, monkeypatch) -> Iterator[None]:
    settings.CONSOLE_AGENTS = {
        "broken": "no_such_package.agent:build",
        "helpdesk": "examples.helpdesk_agent.agent:build",
    }
    monkeypatch.setattr(registry, "_settings_loaded", False)
    yield
    registry.agent_unregister("helpdesk")


def test_a_start_of_an_agent_that_cannot_load_is_a_400_naming_it(broken_and_fine, alice):
    with pytest.raises(RunInputInvalid) as refused:
        run_start(agent="broken", input={}, user=alice)
    assert "could not be loaded" in refused.value.errors["agent"]
    assert "no_such_package" in refused.value.errors["agent"]


def test_the_other_agents_of_the_setting_still_load(broken_and_fine):
    assert registry.agent_get("helpdesk").name == "helpdesk"


def test_a_queued_run_of_an_agent_that_cannot_load_is_flagged_not_dead(broken_and_fine, alice):
    run = RunFactory(agent="broken", status=AgentRun.Status.QUEUED, requested_by=alice)
    assert advance.run_advance(run_id=run.id) == "flagged: unknown agent"
    run.refresh_from_db()
    assert run.status != AgentRun.Status.DEAD
    assert "could not be loaded" in run.flag


def test_a_long_flag_reason_fits_the_run_and_stays_whole_in_the_audit(alice):
    from approvals.services import run_flag
    from audit.models import AuditEvent

    run = RunFactory(requested_by=alice)
    reason = "x" * 500
    run_flag(run=run, reason=reason)
    run.refresh_from_db()
    assert len(run.flag) == 200 and run.flag.endswith("…")
    event = AuditEvent.objects.get(action="run.flagged", run_id=run.id)
    assert event.data["reason"] == reason
