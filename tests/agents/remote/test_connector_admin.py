"""The Agent Server connector in the admin: every change audited, the API key write-only (never
shown back, never in the audit), a bad graph list refused with the field named; its poll is a
schedule every minute on a task that exists."""

from __future__ import annotations

import json

import pytest

from agents.remote.connector_models import AgentServerConnector
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from tests.agents.remote.conftest import make_agent
from tests.support.processes import free_port

pytestmark = pytest.mark.django_db

KEY = "lsv2_sk_do-not-show-me"
ADD = "/admin/agents/agentserverconnector/add/"


def form(agent, **fields) -> dict:
    return {
        "name": "prod",
        "url": "https://agents.example/deployment",
        "graph_ids": '["refunds"]',
        "agent": agent.pk,
        "is_active": "on",
        "max_threads": 50,
        "api_key": "",
        **fields,
    }


def test_the_api_key_is_write_only_and_every_change_is_audited_without_it(admin_client):
    agent = make_agent("deployed", callback_url="")
    assert admin_client.post(ADD, form(agent, api_key=KEY)).status_code == 302
    connector = AgentServerConnector.objects.get()
    assert connector.api_key == KEY
    change = f"/admin/agents/agentserverconnector/{connector.pk}/change/"
    assert KEY not in admin_client.get(change).content.decode()

    admin_client.post(change, form(agent, max_threads=10))  # empty key field: kept
    connector.refresh_from_db()
    assert (connector.api_key, connector.max_threads) == (KEY, 10)
    admin_client.post(change, form(agent, clear_api_key="on"))
    connector.refresh_from_db()
    assert connector.api_key == ""
    admin_client.post(f"/admin/agents/agentserverconnector/{connector.pk}/delete/", {"post": "yes"})

    events = AuditEvent.objects.filter(action="agent_server_connector.changed").order_by("seq")
    assert [(e.data["change"], e.data["state"]["api_key_set"]) for e in events] == [
        ("created", True),
        ("changed", True),
        ("changed", False),
        ("deleted", False),
    ]
    assert all(KEY not in json.dumps(e.data) for e in AuditEvent.objects.all())
    assert chain_verify_db().ok


@pytest.mark.parametrize("graph_ids", ["[]", '"refunds"', '[""]', "[1]"])
def test_a_graph_list_that_is_not_a_list_of_ids_is_refused(admin_client, graph_ids):
    agent = make_agent("deployed", callback_url="")
    refused = admin_client.post(ADD, form(agent, graph_ids=graph_ids))
    assert refused.status_code == 200
    assert not AgentServerConnector.objects.exists()
    assert list(refused.context["adminform"].form.errors) == ["graph_ids"]


def test_poll_now_reports_an_unreachable_deployment(admin_client):
    agent = make_agent("deployed", callback_url="")
    connector = AgentServerConnector.objects.create(
        name="down", url=f"http://127.0.0.1:{free_port()}", graph_ids=["refunds"], agent=agent
    )
    response = admin_client.post(
        "/admin/agents/agentserverconnector/",
        {"action": "poll_now", "_selected_action": [connector.pk]},
        follow=True,
    )
    assert "&#x27;errors&#x27;: 1" in response.content.decode()
    connector.refresh_from_db()
    assert "ConnectError" in connector.last_error


def test_the_migration_schedules_a_poll_every_minute_on_a_task_that_exists():
    from importlib import import_module

    from django.apps import apps
    from django.utils.module_loading import import_string
    from django_q.models import Schedule

    migration = import_module("agents.migrations.0013_agent_server_connectors")
    name, func = migration.SCHEDULES[0]
    Schedule.objects.filter(name=name).delete()  # as a fresh database has it
    migration.install(apps, None)
    schedule = Schedule.objects.get(name=name)
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == ("I", 1, -1)
    assert schedule.func == "agents.tasks.connectors_poll"
    assert callable(import_string(schedule.func))


def test_a_new_url_without_a_new_key_is_refused_naming_the_key_field(admin_client):
    """The stored key was given for the old URL: it never follows the connector elsewhere."""
    agent = make_agent("deployed", callback_url="")
    admin_client.post(ADD, form(agent, api_key=KEY))
    connector = AgentServerConnector.objects.get()
    change = f"/admin/agents/agentserverconnector/{connector.pk}/change/"

    response = admin_client.post(change, form(agent, url="https://elsewhere.example"))
    assert response.status_code == 200
    assert "api_key" in response.context["adminform"].form.errors
    connector.refresh_from_db()
    assert (connector.url, connector.api_key) == ("https://agents.example/deployment", KEY)

    admin_client.post(change, form(agent, url="https://elsewhere.example", api_key="new-key"))
    connector.refresh_from_db()
    assert (connector.url, connector.api_key) == ("https://elsewhere.example", "new-key")
    admin_client.post(change, form(agent, url="https://third.example", clear_api_key="on"))
    connector.refresh_from_db()
    assert (connector.url, connector.api_key) == ("https://third.example", "")


def test_a_url_with_a_user_name_or_password_is_refused_and_never_audited(admin_client):
    agent = make_agent("deployed", callback_url="")
    response = admin_client.post(ADD, form(agent, url="https://svc:hunter2@agents.example"))
    assert response.status_code == 200
    assert "url" in response.context["adminform"].form.errors
    assert not AgentServerConnector.objects.exists()
    assert all("hunter2" not in json.dumps(e.data) for e in AuditEvent.objects.all())
