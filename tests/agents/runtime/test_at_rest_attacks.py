"""Hostile review of encryption at rest (agents/runtime/at_rest.py): the attacks that worked,
each kept as a test (the others are listed in docs/operations.md, "Encryption at rest")."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import override_settings
from django.urls import reverse

from agents import selectors
from agents.runtime import advance
from agents.services import run_start
from approvals.models import AgentRun
from audit.models import AuditEvent
from tests.agents.runtime import test_at_rest
from tests.agents.runtime.test_at_rest import K1, K2, _pause, _resume_and_check
from tests.support.at_rest import build_secret_graph, secret_config
from tests.support.people import DECIDE, client_for, person

pytestmark = pytest.mark.django_db

storage = test_at_rest.storage  # the same savers (fast, fenced, sqlite) on scratch tables


# --- a metadata key named like the saver's own marker -----------------------------------------


@override_settings(ENCRYPTION_KEYS=K1)
def test_a_configurable_value_named_sealed_does_not_make_the_thread_unreadable(storage):
    """LangGraph copies every primitive configurable value into the metadata; one that happens
    to be called ``sealed`` must come back as it was, not be taken for the sealed metadata."""
    config = secret_config()
    config["configurable"]["sealed"] = "yes"
    with storage.ours() as saver:
        graph = _pause(saver, config)
        assert [s.metadata["sealed"] for s in graph.get_state_history(config)][0] == "yes"
        _resume_and_check(graph, config)


@override_settings(ENCRYPTION_KEYS=K1)
def test_a_plaintext_thread_with_a_metadata_key_named_sealed_still_resumes(storage):
    """A thread written before encryption whose metadata has a key ``sealed`` (the agent's own)
    is read as it is: the compatibility path must not try to open it."""
    config = secret_config()
    config["metadata"]["sealed"] = "not-a-sealed-value"
    with storage.stock() as stock:
        _pause(stock, config)
    with storage.ours() as saver:
        graph = build_secret_graph(checkpointer=saver)
        assert graph.get_state(config).metadata["sealed"] == "not-a-sealed-value"
        assert [s.metadata.get("sealed") for s in graph.get_state_history(config)][0] == (
            "not-a-sealed-value"
        )
        _resume_and_check(graph, config)


# --- the console's time travel when a key is missing ------------------------------------------


def _waiting_run_under_k1(alice: Any) -> tuple[AgentRun, str]:
    with override_settings(ENCRYPTION_KEYS=K1):
        run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
        assert advance.run_advance(run_id=run.id) == "waiting"
        checkpoint_id = selectors.run_history(run=run)[-1]["checkpoint_id"]
    return run, checkpoint_id


def _messages(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_the_state_at_a_step_sealed_under_a_removed_key_says_so_instead_of_no_such_step(
    note_agent, alice
):
    run, checkpoint_id = _waiting_run_under_k1(alice)
    tina = client_for(person("tina", perms=[DECIDE, "agents.time_travel"]))
    with override_settings(ENCRYPTION_KEYS=K2):
        response = tina.get(reverse("agents:run-step", args=[run.pk, checkpoint_id]))
    assert response.status_code == 302
    assert response["Location"] == reverse("agents:run", args=[run.pk])
    assert any("key 'k1'" in m and "ENCRYPTION_KEYS" in m for m in _messages(response))
    assert not AuditEvent.objects.filter(action="run.state_viewed", run_id=run.pk).exists()
    with override_settings(ENCRYPTION_KEYS=K1):  # the key is back: the same step reads
        assert tina.get(reverse("agents:run-step", args=[run.pk, checkpoint_id])).status_code == 200


def test_a_fork_of_a_run_sealed_under_a_removed_key_says_so_instead_of_no_such_step(
    note_agent, alice
):
    run, checkpoint_id = _waiting_run_under_k1(alice)
    tina = client_for(person("tina", perms=[DECIDE, "agents.time_travel"]))
    with override_settings(ENCRYPTION_KEYS=K2):
        response = tina.post(
            reverse("agents:run-fork", args=[run.pk]), {"checkpoint_id": checkpoint_id}
        )
    assert response.status_code == 302
    assert response["Location"] == reverse("agents:run", args=[run.pk])
    assert any("key 'k1'" in m and "ENCRYPTION_KEYS" in m for m in _messages(response))
    assert not AgentRun.objects.filter(parent_run=run).exists()


def test_the_state_at_a_step_whose_key_id_names_another_key_is_not_a_server_error(
    note_agent, alice
):
    run, checkpoint_id = _waiting_run_under_k1(alice)
    tina = client_for(person("tina", perms=[DECIDE, "agents.time_travel"]))
    other = K2.replace("k2:", "k1:")  # the id k1, another key
    with override_settings(ENCRYPTION_KEYS=other):
        response = tina.get(reverse("agents:run-step", args=[run.pk, checkpoint_id]))
    assert response.status_code == 302
    assert any("same key" in m for m in _messages(response))
