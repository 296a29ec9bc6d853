"""What people see of retention: a pruned run's page and steps say "pruned by retention" (never
a 500), the ops page shows the checkpoint tables of real runs, and the admin's policy form
offers registered agents and audits every change."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from agents import selectors as agent_selectors
from agents.models import RetentionCursor, RetentionPolicy
from agents.runtime import retention
from approvals.models import AgentRun
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from tests.support.people import client_for, person
from tests.support.retention import finished_run

transactional = pytest.mark.django_db(transaction=True)


def _time_traveller():
    return person("tina", perms=["agents.time_travel", "audit.view_audit"])


@transactional
@pytest.mark.parametrize("action", ["final", "delete"])
def test_a_pruned_runs_page_and_steps_say_pruned_by_retention(note_agent, alice, bob, action):
    RetentionPolicy.objects.create(agent="note_agent", keep_days=30, action=action)
    run = finished_run(alice, bob)
    first_step = agent_selectors.run_history(run=run)[0]["checkpoint_id"]
    retention.checkpoints_prune_pass()
    viewer = client_for(_time_traveller())

    page = viewer.get(reverse("agents:run", args=[run.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    word = "pruned" if action == "final" else "deleted"
    assert re.search(rf'data-retention="pruned">[^<]*checkpoints were {word} by retention', body)
    assert "executed" in body  # the output is still shown
    assert "Fork from here</button>" not in body
    # The requester, without time travel, reads the same notice.
    own = client_for(alice).get(reverse("agents:run", args=[run.pk])).content.decode()
    assert f"checkpoints were {word} by retention" in own

    step = viewer.get(reverse("agents:run-step", args=[run.pk, first_step]))
    assert step.status_code == 410
    assert "Step pruned by retention" in step.content.decode()

    fork = viewer.post(
        reverse("agents:run-fork", args=[run.pk]), {"checkpoint_id": first_step}, follow=True
    )
    assert fork.status_code == 200
    assert "by retention" in fork.content.decode()
    assert AgentRun.objects.count() == 1  # no fork was made


@transactional
def test_the_ops_page_shows_the_checkpoint_tables_of_real_runs_to_staff(note_agent, alice, bob):
    finished_run(alice, bob)
    staff = person("sam")
    staff.is_staff = True
    staff.save()

    before = client_for(staff).get(reverse("ops"))
    result = retention.checkpoints_prune_pass()
    after = client_for(staff).get(reverse("ops"))

    assert before.status_code == after.status_code == 200
    html = after.content.decode()
    assert re.search(r'data-policy="note_agent"', html)
    assert re.search(r"data-pruned-total>1 to their final checkpoint", html)
    assert 'data-table="retention-passes"' in html
    assert "No pass has pruned anything yet." in before.content.decode()
    shown, now = _table_rows(before.content.decode()), _table_rows(html)
    if "checkpoint_blobs" in now:  # Postgres: the statistics' estimate, each table listed
        assert set(now) == {"checkpoints", "checkpoint_blobs", "checkpoint_writes"}
    else:  # SQLite: counted, so exact (other tests' threads share the file)
        assert set(now) == {"checkpoints", "writes"}
        assert shown["checkpoints"] - now["checkpoints"] == result.rows.checkpoints > 0
        assert shown["writes"] - now["writes"] == result.rows.writes > 0


def _table_rows(html: str) -> dict[str, int]:
    pattern = r'data-checkpoint-table="(\w+)">.*?data-rows="(\d+)"'
    return {name: int(rows) for name, rows in re.findall(pattern, html, flags=re.S)}


@pytest.mark.django_db
def test_the_admin_policy_form_offers_registered_agents_and_audits_each_change(
    note_agent, admin_client
):
    add = admin_client.get("/admin/agents/retentionpolicy/add/")
    assert add.status_code == 200
    assert '<option value="note_agent">note_agent</option>' in add.content.decode()

    refused = admin_client.post(
        "/admin/agents/retentionpolicy/add/",
        {"agent": "note_agnet", "keep_days": 7, "action": "delete"},
    )
    assert refused.status_code == 200 and not RetentionPolicy.objects.exists()
    assert "Select a valid choice" in refused.content.decode()

    RetentionCursor.objects.create(scope="", finished_at=timezone.now(), run_id=AgentRun().id)
    created = admin_client.post(
        "/admin/agents/retentionpolicy/add/",
        {"agent": "note_agent", "keep_days": 7, "action": "delete"},
    )
    assert created.status_code == 302
    policy = RetentionPolicy.objects.get()
    assert (policy.agent, policy.keep_days, policy.action) == ("note_agent", 7, "delete")
    assert not RetentionCursor.objects.exists()  # every scope reads again from its start

    admin_client.post(
        f"/admin/agents/retentionpolicy/{policy.pk}/change/",
        {"agent": "note_agent", "keep_days": 14, "action": "final"},
    )
    admin_client.post(f"/admin/agents/retentionpolicy/{policy.pk}/delete/", {"post": "yes"})

    assert not RetentionPolicy.objects.exists()
    events = [
        (e.data["change"], e.data["keep_days"], e.data["action"], e.actor_username)
        for e in AuditEvent.objects.filter(action="retention.policy_changed").order_by("seq")
    ]
    assert events == [
        ("created", 7, "delete", "admin"),
        ("changed", 14, "final", "admin"),
        ("deleted", 14, "final", "admin"),
    ]
    assert chain_verify_db().ok


@pytest.mark.django_db
def test_the_migration_schedules_a_pass_every_minute_on_a_task_that_exists():
    from importlib import import_module

    from django.apps import apps
    from django.utils.module_loading import import_string
    from django_q.models import Schedule

    migration = import_module("agents.migrations.0009_h14_retention")
    Schedule.objects.filter(name=migration.SCHEDULE[0]).delete()  # as a fresh database has it
    migration.install(apps, None)

    schedule = Schedule.objects.get(name=migration.SCHEDULE[0])
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == ("I", 1, -1)
    assert callable(import_string(schedule.func))
    assert schedule.func == "agents.tasks.checkpoints_prune"
