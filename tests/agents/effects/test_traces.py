"""The ``tool.call`` span of each call through the effects ledger: tool, key, attempts and
retries, and what the call came to (succeeded, replayed, in doubt, error)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from agents.effects import ledger
from agents.effects.errors import RetryableToolError, ToolError, ToolTimeout
from agents.effects.ledger import effect_execute
from agents.models import Effect
from agents.tools import ToolSpec, tool_register, tool_unregister
from tests.support.factories import RunFactory
from tests.support.traces import spans_recorded

pytestmark = pytest.mark.django_db(transaction=True)


class EchoArgs(BaseModel):
    text: str


class Scripted:
    """A downstream whose answers are scripted: exceptions to raise, then results."""

    def __init__(self) -> None:
        self.script: list[Exception] = []
        self.calls = 0

    def __call__(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.calls += 1
        if self.script:
            raise self.script.pop(0)
        return {"echo": args["text"]}


@pytest.fixture
def downstream(monkeypatch):
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    fake = Scripted()
    tool_register(
        ToolSpec(
            name="echo_traced", description="echo", args_model=EchoArgs, tier="write", run=fake
        )
    )
    yield fake
    tool_unregister("echo_traced")


@pytest.fixture
def spans():
    with spans_recorded() as recorded:
        yield recorded


@pytest.fixture
def run(alice):
    return RunFactory(agent="incident_copilot", requested_by=alice)


def _call(run, key: str = "k1") -> Any:
    return effect_execute(run_id=str(run.pk), key=key, tool="echo_traced", args={"text": "hi"})


def test_a_call_that_succeeds_after_retries_counts_them(run, downstream, spans):
    downstream.script = [RetryableToolError("503"), RetryableToolError("503")]
    _call(run)
    (span,) = spans.named("tool.call")
    assert span.attributes["tool"] == "echo_traced"
    assert span.attributes["effect.key"] == "k1"
    assert span.attributes["run.id"] == str(run.pk)
    assert span.attributes["tool.outcome"] == "succeeded"
    assert span.attributes["tool.attempts"] == downstream.calls == 3
    assert span.attributes["tool.retries"] == 2
    assert span.status.status_code == StatusCode.UNSET


def test_a_second_call_under_the_same_key_is_traced_as_replayed(run, downstream, spans):
    _call(run)
    _call(run)
    first, second = spans.named("tool.call")
    assert first.attributes["tool.outcome"] == "succeeded"
    assert second.attributes["tool.outcome"] == "replayed"
    assert second.attributes["tool.attempts"] == 0 and downstream.calls == 1


def test_a_call_without_an_answer_is_traced_in_doubt(run, downstream, spans, settings):
    settings.TOOL_MAX_RETRIES = 0
    downstream.script = [ToolTimeout("no answer")]
    with pytest.raises(ToolTimeout):
        _call(run)
    (span,) = spans.named("tool.call")
    assert span.attributes["tool.outcome"] == "in_doubt"
    assert Effect.objects.get(key="k1").status == Effect.Status.IN_DOUBT
    assert span.status.status_code == StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]


def test_a_refused_call_is_traced_as_an_error_with_its_attempts(run, downstream, spans, settings):
    settings.TOOL_MAX_RETRIES = 1
    downstream.script = [RetryableToolError("503"), ToolError("400 bad request")]
    with pytest.raises(ToolError):
        _call(run)
    (span,) = spans.named("tool.call")
    assert span.attributes["tool.outcome"] == "error"
    assert span.attributes["tool.attempts"] == 2 and span.attributes["tool.retries"] == 1
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "ToolError"


def test_a_failed_call_s_span_names_the_exception_type_never_its_message(run, downstream, spans):
    # An error's text can hold run data (a downstream echoing the args); the collector is out
    # of erasure's reach, so spans carry the type only.
    downstream.script = [ToolError("400: no account for ada@example.com")]
    with pytest.raises(ToolError):
        _call(run)
    (span,) = spans.named("tool.call")
    (event,) = span.events
    assert event.name == "exception"
    assert dict(event.attributes) == {"exception.type": "agents.effects.errors.ToolError"}
    assert "ada@example.com" not in repr(span.to_json())
