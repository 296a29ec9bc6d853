"""Invariant 15 at the way in: a run input the audit cannot hash exactly (NaN, infinities,
integers beyond 2**53 - 1) is a 400 naming the field; any other JSON value round-trips through
the database and the chain verifies (hypothesis, both databases)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.runtime.registry import AgentSpec
from approvals.models import AgentRun
from audit.canonical import canonical_parse
from audit.models import AuditEvent
from audit.private import event_data_open
from audit.verify import chain_verify_db, json_same
from tests.support.hypothesis_profiles import SLOW_IS_EXPECTED
from tests.support.json_values import TEXT, json_values
from tests.support.people import client_for, rest_client_for
from tests.support.probes import probe_registered

pytestmark = pytest.mark.usefixtures("queued")  # every task enqueued is recorded, none runs

FREE = "free_probe"


@pytest.fixture
def free_probe() -> Iterator[AgentSpec]:
    """A probe agent that takes any JSON object as its input."""

    def never_built(**kwargs):
        raise AssertionError("never built")

    with probe_registered(AgentSpec(name=FREE, version="1", factory=never_built)) as spec:
        yield spec


def _post_json(client, text: str):
    return client.post("/api/runs/", text, content_type="application/json")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # DRF's JSONField refuses the infinity 1e400 parses to, naming the field only.
        ('{"agent": "free_probe", "input": {"amount": 1e400}}', "input"),
        ('{"agent": "free_probe", "input": {"a": [1, -1e999]}}', "input"),
        ('{"agent": "free_probe", "input": {"n": 9007199254740992}}', "input.n"),
        ('{"agent": "free_probe", "input": {"n": {"m": -9007199254740993}}}', "input.n.m"),
    ],
)
def test_an_input_the_audit_cannot_hash_exactly_is_a_400_naming_the_field(
    alice, free_probe, body, field
):
    response = _post_json(rest_client_for(alice), body)

    assert response.status_code == 400, response.content
    assert set(response.json()["errors"]) == {field}
    assert not AgentRun.objects.exists()


def test_nan_and_infinity_tokens_are_a_400(alice, free_probe):
    for token in ("NaN", "Infinity", "-Infinity"):
        response = _post_json(
            rest_client_for(alice), f'{{"agent": "{FREE}", "input": {{"x": {token}}}}}'
        )

        assert response.status_code == 400
    assert not AgentRun.objects.exists()


def test_a_form_encoded_infinity_is_a_400_naming_the_field(alice, free_probe):
    # DRF parses form-encoded JSON without checking numbers: 1e400 arrives as infinity.
    response = rest_client_for(alice).post(
        "/api/runs/", {"agent": FREE, "input": '{"x": {"y": 1e400}}'}, format="multipart"
    )

    assert response.status_code == 400, response.content
    assert set(response.json()["errors"]) == {"input.x.y"}


def test_the_start_form_names_a_nan_in_the_input(alice, free_probe):
    response = client_for(alice).post(
        reverse("agents:run-new"), {"agent": FREE, "input": '{"amount": NaN}'}
    )

    assert response.status_code == 400
    assert "amount: NaN and infinities are not JSON numbers" in response.content.decode()
    assert not AgentRun.objects.exists()


def test_an_input_with_numbers_jsonb_rewrites_is_started_and_verifies(alice, free_probe):
    # Fails before chain version 2 on Postgres: jsonb stores these otherwise than they hashed.
    body = '{"agent": "free_probe", "input": {"z": -0.0, "big": 1e21, "one": 1.0, "h": 1e300}}'

    response = _post_json(rest_client_for(alice), body)

    assert response.status_code == 201, response.content
    assert chain_verify_db().ok, chain_verify_db().reason


@settings(suppress_health_check=[*SLOW_IS_EXPECTED, HealthCheck.function_scoped_fixture])
@given(value=st.dictionaries(TEXT, json_values(), max_size=4))
def test_any_input_the_api_accepts_round_trips_and_verifies(alice, free_probe, value):
    response = rest_client_for(alice).post(
        "/api/runs/", {"agent": FREE, "input": value}, format="json"
    )

    assert response.status_code == 201, response.content
    run = AgentRun.objects.get(pk=response.json()["id"])
    event = AuditEvent.objects.get(action="run.created", run_id=run.pk)
    hashed = canonical_parse(event.canonical)["data"]
    assert json_same(event.data, hashed)  # the sealed input's envelope, as hashed
    assert json_same(event_data_open(event)["input"], value)
    result = chain_verify_db()
    assert result.ok, result.reason
