"""The example agent service (examples/remote_agent) without a console process: its callback
handler checks signatures, resumes the thread once even when the callback comes twice, and a
cancelled request leaves the thread unpaid. The HTTP routes answer as documented."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import ThreadingHTTPServer

import httpx
import pytest
from approval_console_client import ConsoleClient, WebhookVerificationError
from approval_console_client.webhooks import sign

from examples.remote_agent.server import AgentService, Settings, handler_for
from tests.support.fake_console import KEY, FakeConsole

SECRET = "whsec_" + base64.b64encode(b"a" * 32).decode()
ASK = "Refund 1250 cents for order A-1"


@pytest.fixture
def console() -> FakeConsole:
    return FakeConsole()


@pytest.fixture
def service(console, tmp_path) -> AgentService:
    settings = Settings(
        console_url="https://console.test", agent_key=KEY, callback_secret=SECRET, data_dir=tmp_path
    )
    client = ConsoleClient("https://console.test", KEY, transport=console.transport)
    return AgentService(settings, client=client)


def signed(event: dict, *, secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"type": "approval_request.decided", **event}).encode()
    stamp = int(time.time())
    return body, {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(body, msg_id="msg_1", timestamp=stamp, secret=secret),
    }


def settle(service: AgentService) -> None:
    for worker in [t for t in threading.enumerate() if t.name.startswith("resume-")]:
        worker.join(timeout=10)


def test_a_decided_callback_resumes_the_thread_and_a_repeat_pays_nothing_more(service, console):
    started = service.run_start(ASK)
    assert started["status"] == "waiting"
    (request_id,) = started["console_request_ids"]
    decided = console.decide(request_id, [{"type": "approve"}])
    for _ in range(2):
        service.callback(*signed(decided))
        settle(service)
    state = service.run_state(started["thread_id"])
    assert state["status"] == "completed"
    assert [p["idempotency_key"] for p in state["payments"]] == [
        decided["approvals"][0]["idempotency_key"]
    ]


def test_a_callback_signed_with_another_secret_is_refused_and_resumes_nothing(service, console):
    started = service.run_start(ASK)
    decided = console.decide(started["console_request_ids"][0], [{"type": "approve"}])
    other = "whsec_" + base64.b64encode(b"b" * 32).decode()
    with pytest.raises(WebhookVerificationError):
        service.callback(*signed(decided, secret=other))
    settle(service)
    assert service.run_state(started["thread_id"])["status"] == "waiting"
    assert service.payments.all() == []


def test_a_cancelled_request_leaves_the_thread_unpaid_and_cancelled(service, console):
    started = service.run_start(ASK)
    request = console.requests[started["console_request_ids"][0]]
    service.callback(*signed({**request, "status": "cancelled"}))
    settle(service)
    assert service.run_state(started["thread_id"])["status"] == "cancelled"
    assert service.payments.all() == []


def test_the_http_routes(service, console):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(service))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert httpx.post(f"{base}/runs", json={}).status_code == 400
        started = httpx.post(f"{base}/runs", json={"input": ASK})
        assert started.status_code == 201
        thread = started.json()["thread_id"]
        decided = console.decide(started.json()["console_request_ids"][0], [{"type": "approve"}])
        body, headers = signed(decided)
        assert httpx.post(f"{base}/callbacks/console", content=body).status_code == 401
        answer = httpx.post(f"{base}/callbacks/console", content=body, headers=headers)
        assert answer.status_code == 204
        settle(service)
        assert httpx.get(f"{base}/runs/{thread}").json()["status"] == "completed"
        assert httpx.get(f"{base}/runs/nope").status_code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_settings_name_what_is_missing():
    with pytest.raises(SystemExit, match="CONSOLE_AGENT_KEY, CONSOLE_CALLBACK_SECRET"):
        Settings.from_env({"CONSOLE_URL": "http://c"})
    with pytest.raises(SystemExit, match="PORT"):
        Settings.from_env(
            {
                "CONSOLE_URL": "c",
                "CONSOLE_AGENT_KEY": "k",
                "CONSOLE_CALLBACK_SECRET": "s",
                "PORT": "x",
            }
        )


@pytest.mark.parametrize("secret", ["whsec_", "whsec_   ", "not base64!"])
def test_settings_refuse_a_callback_secret_with_no_key_in_it(secret):
    """A bare ``whsec_`` (a template left as is) would verify callbacks signed with the empty
    key, which anyone can compute: the service refuses to start."""
    env = {"CONSOLE_URL": "c", "CONSOLE_AGENT_KEY": "k", "CONSOLE_CALLBACK_SECRET": secret}
    with pytest.raises(SystemExit, match="CONSOLE_CALLBACK_SECRET"):
        Settings.from_env(env)
