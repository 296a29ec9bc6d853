"""schemathesis against the served OpenAPI schema: every operation, as an approver and as an
admin, over a database holding runs and approvals; no server error and every answer conforms
to the schema (status code, content type, body, headers).

schemathesis's own engine runs the phases (explicit examples, coverage, fuzzing, and the
stateful phase that follows the links it infers between operations) with a fixed seed and
deterministic generation. Its workers are threads, so the API is served by pytest-django's
``live_server`` (its own thread and database connection, committed data) rather than called
in-process. ``pytest.mark.usefixtures("queued")``: the runs it starts never execute.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status
from schemathesis.engine.events import FatalError, NonFatalError, PhaseFinished, ScenarioFinished

from tests.support.api_auth import api_auth_header
from tests.support.factories import RunFactory
from tests.support.probes import ProbeApprovalFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

SEED = 20261201
MAX_EXAMPLES = 15


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(alice, bob, carol, demo_policy, api_probe) -> None:
    """Runs and approvals of alice (pending, for bob's tier) and carol, one finished run."""
    for _ in range(3):
        ProbeApprovalFactory(run__requested_by=alice)
    ProbeApprovalFactory(run__requested_by=carol)
    RunFactory(requested_by=alice, status="completed")


def fuzz_config(*, schemes: list[str], credential: str) -> SchemathesisConfig:
    """Our settings; ``credential`` (the Authorization value) for each API-key scheme in
    ``schemes``, so the ``ignored_auth`` check can send requests without it."""
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            # Hypothesis's "too slow" health check times data generation, which a loaded 2-core
            # CI machine can fail; it says nothing of the API, so it is off.
            "suppress-health-check": ["too_slow"],
            # A fresh connection per request: the live server is the standard library's
            # http.server, whose own error page for a request it cannot parse (send_error's
            # "<!DOCTYPE HTML>") can stay in a kept-alive stream and be read as the next
            # answer's status line (a ConnectionError "BadStatusLine", seen in CI). The
            # console's servers are gunicorn; this is the test server's quirk, not the API's.
            "headers": {"Connection": "close"},
            "auth": {"openapi": {name: {"api_key": credential} for name in schemes}},
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": True},
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": True, "max-steps": 6},
            },
            # Every check, but one: positive_data_acceptance wants every schema-valid request
            # accepted, and some never can be: an opaque cursor we did not write, a payload
            # hash that is not the approval's, "edit" without args are documented 400s/409s.
            "checks": {"enabled": True, "positive_data_acceptance": {"enabled": False}},
        }
    )


def failures_of(events: list[Any]) -> list[str]:
    """One line per failed check (operation, check, request, answer) or engine error."""
    lines: list[str] = []
    for event in events:
        if isinstance(event, FatalError):
            lines.append(f"engine error: {event.exception!r}")
        if isinstance(event, NonFatalError):
            lines.append(f"engine error in {event.phase} {event.label}: {event.value!r}")
        if not isinstance(event, ScenarioFinished) or event.status != Status.FAILURE:
            continue
        recorder = event.recorder
        for case_id, checks in recorder.checks.items():
            for check in checks:
                if check.status != Status.FAILURE:
                    continue
                interaction = recorder.interactions.get(case_id)
                request = interaction.request if interaction else None
                response = interaction.response if interaction else None
                lines.append(
                    f"{recorder.label}: {check.name}: {check.failure_info and check.failure_info.failure}"
                    f" | {request and request.method} {request and request.uri}"
                    f" | {response and response.status_code}"
                    f" {response and (response.content or b'')[:200]!r}"
                )
    return lines


@pytest.mark.parametrize("who", ["bob", "admin"])
def test_every_api_operation_conforms_to_its_schema_and_never_fails(
    request, world, live_server, who
):
    headers = api_auth_header(request.getfixturevalue(who))
    url = f"{live_server.url}/api/schema/?format=json"
    served = schemathesis.openapi.from_url(url, headers=headers).raw_schema
    schemes = [
        name
        for name, scheme in served["components"]["securitySchemes"].items()
        if scheme.get("in") == "header" and scheme.get("name") == "Authorization"
    ]
    config = fuzz_config(schemes=schemes, credential=headers["Authorization"])
    # Revoking tokens would revoke the one the run signs in with (tests/console/test_auth.py
    # holds those two operations).
    schema = schemathesis.openapi.from_url(url, config=config, headers=headers).exclude(
        operation_id=["auth_tokens_revoke", "auth_tokens_revoke_all"]
    )

    events = list(schemathesis.engine.from_schema(schema).execute())

    failures = failures_of(events)
    assert not failures, "\n".join(failures)
    ran = {e.phase.name.value: e.status for e in events if isinstance(e, PhaseFinished)}
    # The schema has no examples of its own (that phase is skipped); the others all ran.
    assert {ran[phase] for phase in ("coverage", "fuzzing", "stateful")} == {Status.SUCCESS}
