"""ConsoleClient over httpx.MockTransport: the wire contract's bodies, the error classes, the
retries, the long poll loop, resume_value."""

from __future__ import annotations

import json

import httpx
import pytest
from approval_console_client import (
    BadRequest,
    Conflict,
    ConsoleClient,
    ConsoleError,
    ConsoleUnavailable,
    Forbidden,
    NotDecided,
    NotFound,
    ServerError,
    Unauthorized,
    resume_value,
)

from tests.support.fake_console import KEY, FakeConsole

VALUE = {
    "action_requests": [{"name": "refund_issue", "args": {"order_id": "A-1"}, "description": ""}],
    "review_configs": [{"action_name": "refund_issue", "allowed_decisions": ["approve"]}],
}


def client_for(transport: httpx.BaseTransport, **kwargs) -> tuple[ConsoleClient, list[float]]:
    slept: list[float] = []
    client = ConsoleClient(
        "https://console.test/", KEY, transport=transport, sleep=slept.append, **kwargs
    )
    return client, slept


def test_create_sends_the_agent_key_and_only_the_fields_given():
    console = FakeConsole()
    client, _ = client_for(console.transport)
    made = client.create("t-1", "i-1", VALUE, rationale="asked", callback_url="https://a/cb")
    sent = console.calls[0]
    assert sent.headers["Authorization"] == f"Agent {KEY}"
    assert sent.url == "https://console.test/api/approval-requests/"
    assert json.loads(sent.content) == {
        "thread_id": "t-1",
        "interrupt_id": "i-1",
        "value": VALUE,
        "rationale": "asked",
        "callback_url": "https://a/cb",
    }
    assert made.created is True
    assert made.status == "pending" and made.is_pending
    assert made.approvals[0].tool == "refund_issue"
    assert made.approvals[0].idempotency_key.startswith("cak_")


def test_a_retried_create_returns_the_same_request_marked_not_created():
    console = FakeConsole()
    client, _ = client_for(console.transport)
    first = client.create("t-1", "i-1", VALUE)
    again = client.create("t-1", "i-1", VALUE)
    assert again.id == first.id
    assert again.created is False
    assert again.approvals == first.approvals


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, BadRequest),
        (401, Unauthorized),
        (403, Forbidden),
        (404, NotFound),
        (409, Conflict),
        (418, ConsoleError),
    ],
)
def test_each_error_status_raises_its_class_with_the_body(status, error):
    body = {"value": ["The console cannot read this value."]}
    client, slept = client_for(httpx.MockTransport(lambda r: httpx.Response(status, json=body)))
    with pytest.raises(error) as raised:
        client.get("x")
    assert raised.value.status == status
    assert raised.value.body == body
    assert "value: " in str(raised.value)
    assert slept == []  # a 4xx is never retried


def test_the_same_ids_with_another_value_is_a_conflict():
    console = FakeConsole()
    client, _ = client_for(console.transport)
    client.create("t-1", "i-1", VALUE)
    with pytest.raises(Conflict):
        client.create("t-1", "i-1", {**VALUE, "action_requests": []})


def test_a_wrong_key_is_unauthorized():
    client = ConsoleClient("https://console.test", "agk_wrong", transport=FakeConsole().transport)
    with pytest.raises(Unauthorized):
        client.create("t-1", "i-1", VALUE)


def test_connection_errors_and_5xx_are_retried_with_backoff_then_succeed():
    console = FakeConsole()
    failures = [httpx.ConnectError("refused"), httpx.Response(503), httpx.Response(502)]

    def flaky(request: httpx.Request) -> httpx.Response:
        if failures:
            failure = failures.pop(0)
            if isinstance(failure, Exception):
                raise failure
            return failure
        return console.handle(request)

    client, slept = client_for(httpx.MockTransport(flaky))
    made = client.create("t-1", "i-1", VALUE)
    assert made.created is True
    assert slept == [0.5, 1.0, 2.0]
    assert len(console.requests) == 1


def test_retries_give_up_after_the_configured_number():
    client, slept = client_for(httpx.MockTransport(lambda r: httpx.Response(500)), retries=2)
    with pytest.raises(ServerError) as raised:
        client.create("t-1", "i-1", VALUE)
    assert raised.value.status == 500
    assert slept == [0.5, 1.0]


def test_no_answer_at_all_raises_console_unavailable_after_retries():
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    client, slept = client_for(httpx.MockTransport(down), retries=1)
    with pytest.raises(ConsoleUnavailable) as raised:
        client.get("x")
    assert raised.value.status is None
    assert len(slept) == 1


def test_a_429_waits_as_long_as_retry_after_says():
    answers = [httpx.Response(429, headers={"Retry-After": "7"}), httpx.Response(200, json={})]
    client, slept = client_for(httpx.MockTransport(lambda r: answers.pop(0)))
    client.list()
    assert slept == [7.0]


def test_wait_long_polls_until_the_request_is_decided():
    console = FakeConsole()
    client, _ = client_for(console.transport)
    made = client.create("t-1", "i-1", VALUE)
    polls: list[str] = []
    inner = console.handle

    def decide_on_third_poll(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            polls.append(request.url.params.get("wait"))
            if len(polls) == 3:
                console.decide(made.id, [{"type": "approve"}])
        return inner(request)

    client._http._transport = httpx.MockTransport(decide_on_third_poll)
    decided = client.wait(made.id, poll=20)
    assert polls == ["20", "20", "20"]
    assert decided.is_decided
    assert client.resume_value(decided) == {"decisions": [{"type": "approve"}]}


def test_wait_with_a_timeout_returns_the_pending_request_without_a_longer_poll():
    console = FakeConsole()
    client, _ = client_for(console.transport)
    made = client.create("t-1", "i-1", VALUE)
    still = client.wait(made.id, timeout=2, poll=30)
    waits = [r.url.params.get("wait") for r in console.calls if r.method == "GET"]
    assert still.is_pending
    assert waits and all(w is None or int(w) <= 2 for w in waits)


def test_the_long_poll_asks_the_console_for_at_most_30_seconds():
    console = FakeConsole()
    client, _ = client_for(console.transport)
    made = client.create("t-1", "i-1", VALUE)
    client.get(made.id, wait=90)
    assert console.calls[-1].url.params["wait"] == "30"
    lowered, _ = client_for(console.transport, long_poll_max=5)
    lowered.get(made.id, wait=30)
    assert console.calls[-1].url.params["wait"] == "5"


def test_report_outcome_sends_the_contract_body():
    console = FakeConsole()
    client, _ = client_for(console.transport)
    made = client.create("t-1", "i-1", VALUE)
    approval = made.approvals[0]
    report = {
        "approval_id": approval.id,
        "idempotency_key": approval.idempotency_key,
        "executed_args": {"order_id": "A-1"},
        "result": "refunded",
    }
    recorded = client.report_outcome(made.id, **report)
    assert recorded.id == made.id
    assert recorded.approvals[0].outcome["status"] == "succeeded"
    client.report_outcome(made.id, **report)  # the same report again: fine (200)
    assert console.outcomes[approval.id] == {**report, "status": "succeeded"}
    with pytest.raises(Conflict):
        client.report_outcome(made.id, **{**report, "result": "something else"})
    with pytest.raises(ValueError, match="succeeded"):
        client.report_outcome(made.id, **report, status="done")


def test_resume_value_is_the_resume_of_a_decided_body_in_any_form():
    body = {"id": "r", "status": "decided", "resume": {"decisions": [{"type": "reject"}]}}
    assert resume_value(body) == body["resume"]
    assert resume_value(json.dumps(body)) == body["resume"]
    assert resume_value(json.dumps(body).encode()) == body["resume"]


@pytest.mark.parametrize("status", ["pending", "cancelled"])
def test_resume_value_of_an_undecided_request_raises_not_decided(status):
    with pytest.raises(NotDecided, match=status):
        resume_value({"id": "r", "status": status, "resume": None})
