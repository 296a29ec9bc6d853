"""ConsoleClient.wait when the console answers a long poll at once while still pending (its
long poll slots are taken: Retry-After): it pauses before polling again, never a busy loop."""

from __future__ import annotations

import httpx
from approval_console_client import ConsoleClient
from approval_console_client.client import EARLY_ANSWER_PAUSE_SECONDS

from tests.support.fake_console import KEY, FakeConsole

VALUE = {
    "action_requests": [{"name": "refund_issue", "args": {"order_id": "A-1"}, "description": ""}],
    "review_configs": [{"action_name": "refund_issue", "allowed_decisions": ["approve"]}],
}


def test_wait_pauses_between_polls_the_console_answered_early():
    console = FakeConsole()
    slept: list[float] = []
    client = ConsoleClient(
        "https://console.test/", KEY, transport=console.transport, sleep=slept.append
    )
    made = client.create("t-1", "i-1", VALUE)
    polls: list[str] = []
    inner = console.handle

    def busy(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            polls.append(request.url.params.get("wait"))
            if len(polls) == 3:
                console.decide(made.id, [{"type": "approve"}])
            answer = inner(request)
            answer.headers["Retry-After"] = "2"
            return answer
        return inner(request)

    client._http._transport = httpx.MockTransport(busy)
    decided = client.wait(made.id, poll=20)
    assert decided.is_decided
    assert polls == ["20", "20", "20"]
    assert slept == [EARLY_ANSWER_PAUSE_SECONDS, EARLY_ANSWER_PAUSE_SECONDS]
