"""The ledger's args, result and error are sealed under their run's data key: no plaintext in
the table, a replay still returns the stored result and a retry still matches its fingerprint,
an ``update()`` with plaintext is refused, and an erased run's effects say "erased"."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.db import connection
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone
from pydantic import BaseModel

from agents import selectors as agent_selectors
from agents.effects import ledger
from agents.effects.errors import EffectConflict, ToolError
from agents.effects.reconcile import effect_reconcile
from agents.effects.rows import effect_mark
from agents.models import Effect
from agents.services import effect_settle
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun
from audit.canonical import payload_hash
from core.sealed_fields import field_seal
from core.sealing import MARKER, PlaintextRefused, datakeys_destroy, is_envelope, is_erased
from tests.support.factories import EffectFactory, RunFactory
from tests.support.pages import PageApprovalFactory, PageRunFactory
from tests.support.people import client_for

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_ARG = "ada.lovelace@example.test"
SECRET_RESULT = "refund-ref-7f3a9c"
SECRET_ERROR = "card 4111-1111 declined for ada"


class TextArgs(BaseModel):
    text: str


class Tool:
    """A downstream that answers with a result naming ``SECRET_RESULT``, or raises."""

    def __init__(self) -> None:
        self.calls = 0
        self.raises: Exception | None = None
        self.found: dict[str, Any] | None = None

    def run(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.calls += 1
        if self.raises is not None:
            raise self.raises
        return {"reference": SECRET_RESULT, "for": args["text"]}

    def lookup(self, key: str) -> dict[str, Any] | None:
        return self.found


@pytest.fixture
def tool():
    downstream = Tool()
    tool_register(
        ToolSpec(
            name="sealed_write",
            description="w",
            args_model=TextArgs,
            tier="write",
            run=downstream.run,
            lookup=downstream.lookup,
        )
    )
    yield downstream
    tool_unregister("sealed_write")


@pytest.fixture
def run(alice) -> AgentRun:
    return RunFactory(agent="incident_copilot", requested_by=alice)


def _execute(run: AgentRun, text: str = SECRET_ARG) -> dict[str, Any]:
    return ledger.effect_execute(
        run_id=str(run.id), key=f"{run.thread_id}:call-1", tool="sealed_write", args={"text": text}
    )


def _stored(effect: Effect) -> tuple[Any, Any, str]:
    """args, result and error as the table holds them (no field opens them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT args, result, error FROM agents_effect WHERE id = %s", [effect.pk])
        args, result, error = cursor.fetchone()
    as_json = [json.loads(v) if isinstance(v, str) else v for v in (args, result)]
    return as_json[0], as_json[1], error


def _raw_text(effect: Effect) -> str:
    return json.dumps(_stored(effect))


def test_a_claim_stores_its_args_and_result_sealed(run, tool):
    assert _execute(run) == {"reference": SECRET_RESULT, "for": SECRET_ARG}
    effect = Effect.objects.get(run=run)
    args, result, error = _stored(effect)
    assert is_envelope(args) and is_envelope(result) and error == ""
    assert SECRET_ARG not in _raw_text(effect) and SECRET_RESULT not in _raw_text(effect)
    # The model opens them; the fingerprint is still the plaintext args' hash.
    assert effect.args == {"text": SECRET_ARG}
    assert effect.result == {"reference": SECRET_RESULT, "for": SECRET_ARG}
    assert effect.args_fingerprint == payload_hash({"text": SECRET_ARG})


def test_a_replay_with_the_same_args_returns_the_stored_result(run, tool):
    first = _execute(run)
    again = _execute(run)
    assert tool.calls == 1
    assert again == first == {"reference": SECRET_RESULT, "for": SECRET_ARG}


def test_other_args_under_the_same_key_still_conflict(run, tool):
    _execute(run)
    with pytest.raises(EffectConflict):
        _execute(run, text="someone else")
    assert tool.calls == 1


def test_a_failed_call_stores_its_error_sealed(run, tool):
    tool.raises = ToolError(SECRET_ERROR)
    with pytest.raises(ToolError):
        _execute(run)
    effect = Effect.objects.get(run=run)
    assert effect.status == Effect.Status.FAILED
    _, _, error = _stored(effect)
    assert SECRET_ERROR not in error and is_envelope(json.loads(error))
    assert effect.error == f"ToolError: {SECRET_ERROR}"


def test_an_update_with_plaintext_is_refused_and_effect_mark_seals(run):
    effect = EffectFactory(run=run)
    rows = Effect.objects.filter(pk=effect.pk)
    with pytest.raises(PlaintextRefused):
        rows.update(result={"reference": SECRET_RESULT})
    with pytest.raises(PlaintextRefused):
        rows.update(error=SECRET_ERROR)
    assert effect_mark(
        effect,
        where={"status": Effect.Status.CLAIMED},
        update={"status": Effect.Status.FAILED, "error": SECRET_ERROR},
        action="effect.failed",
        actor="system:test",
        data={},
    )
    assert effect_mark(
        effect,
        where={"status": Effect.Status.FAILED},
        update={"status": Effect.Status.SUCCEEDED, "result": {"reference": SECRET_RESULT}},
        action="effect.succeeded",
        actor="system:test",
        data={},
    )
    _, result, error = _stored(effect)
    assert is_envelope(result) and is_envelope(json.loads(error))
    assert SECRET_RESULT not in _raw_text(effect) and SECRET_ERROR not in _raw_text(effect)
    effect.refresh_from_db()
    assert (effect.result, effect.error) == ({"reference": SECRET_RESULT}, SECRET_ERROR)


def test_the_result_the_downstream_reports_by_key_is_stored_sealed(run, tool):
    effect = EffectFactory(run=run, tool="sealed_write", status=Effect.Status.IN_DOUBT)
    tool.found = {"reference": SECRET_RESULT}
    assert effect_reconcile(effect) == "succeeded"
    _, result, _ = _stored(effect)
    assert is_envelope(result) and SECRET_RESULT not in _raw_text(effect)
    assert Effect.objects.get(pk=effect.pk).result == {"reference": SECRET_RESULT}


@pytest.mark.usefixtures("queued")
def test_a_persons_settlement_is_stored_sealed(run, tool, bob):
    effect = EffectFactory(
        run=run,
        tool="sealed_write",
        status=Effect.Status.IN_DOUBT,
        escalated_at=timezone.now(),
        tier="write",
    )
    effect_settle(effect=effect, outcome="done", user=bob, note=SECRET_RESULT)
    _, result, _ = _stored(effect)
    assert is_envelope(result) and SECRET_RESULT not in _raw_text(effect)
    assert Effect.objects.get(pk=effect.pk).result["note"] == SECRET_RESULT


def _run_page_with_an_effect(alice) -> tuple[str, Effect]:
    run = PageRunFactory(requested_by=alice)
    PageApprovalFactory(run=run)  # bob may decide its tier: he sees the run
    effect = EffectFactory(run=run, status=Effect.Status.FAILED)
    Effect.objects.filter(pk=effect.pk).update(
        error=field_seal(Effect, "error", run.pk, SECRET_ERROR)
    )
    return reverse("agents:run", args=[run.pk]), effect


def test_the_run_page_shows_an_erased_effect_as_erased(bob, alice, monkeypatch):
    monkeypatch.setattr(agent_selectors, "run_history", lambda *, run: [])
    url, effect = _run_page_with_an_effect(alice)
    as_bob = client_for(bob)
    before = as_bob.get(url).content.decode()
    assert SECRET_ERROR in before and 'data-erased="effect"' not in before
    datakeys_destroy([effect.run_id])
    response = as_bob.get(url)
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-erased="effect"' in html and effect.key in html
    assert SECRET_ERROR not in html and SECRET_RESULT not in html and MARKER not in html


def test_the_admin_shows_an_effects_sealed_values_opened_or_erased(run, admin):
    effect = EffectFactory(run=run, args={"text": SECRET_ARG})
    model_admin = site._registry[Effect]
    request = RequestFactory().get("/")
    request.user = admin
    assert "args" not in model_admin.get_fields(request, effect)
    assert SECRET_ARG in model_admin.args_opened(Effect.objects.get(pk=effect.pk))
    datakeys_destroy([run.pk])
    erased = Effect.objects.get(pk=effect.pk)
    assert is_erased(erased.args)
    assert model_admin.args_opened(erased) == model_admin.result_opened(erased) == "erased"
    html = client_for(admin).get(reverse("admin:agents_effect_change", args=[effect.pk]))
    assert html.status_code == 200
    assert "erased" in html.content.decode() and MARKER not in html.content.decode()
