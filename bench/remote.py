"""The remote approval service against a real web server and qcluster: how long an agent waits.

For each database (Postgres, SQLite) the script starts gunicorn and a qcluster as
``bench/wakeup.py`` does (the settings' defaults, ORM broker), seeds the demo policy and
people, registers an external agent (``external_agent_save`` + ``external_agent_key_issue``)
whose callback URL is a tiny local receiver (an ``http.server`` thread that verifies each
signature), and measures:

1. ``POST /api/approval-requests/``: a new request (a new thread, an ``HITLRequest`` of one
   ``refund_order`` call, tier write), BENCH_REQUESTS times (default 50), p50 / p95; then
   the same body again (the idempotent retry, 200) for each.
2. decision -> the agent knows, BENCH_DECISIONS times (default 10): a request is opened, a
   long poll ``GET /api/approval-requests/{id}/?wait=30`` is started and left waiting
   0.75-1.25 s (uniform, so the decision falls anywhere in the poll's 0.5 s re-read cycle),
   then bob approves over the API (``POST /api/approvals/{id}/decision/``). From just before
   that POST until (a) the long poll answers ``decided`` and (b) the signed callback reaches
   the receiver. Both on the same decisions.
3. Anchors in the same run: the agent's authenticated ``GET`` of one request (``wait=0``: the
   same authentication, one read and the same body) and one bare ``async_task`` round trip
   (enqueue a no-op -> its result saved), with ratios.

    .venv/bin/python bench/remote.py                     # Postgres and SQLite
    .venv/bin/python bench/remote.py --db sqlite --requests 100 --decisions 20

BENCH_DATABASE_URL names the scratch Postgres database (dropped and made again; default
postgres://postgres@127.0.0.1:5432/bench_remote); SQLite lives under var/bench/remote/.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report import figure, section, setups_each  # noqa: E402 - after the path
from bench.wakeup import (  # noqa: E402
    percentile,
    setup_environment,
    stack_running,
    task_round_trip,
)

SCRATCH = ROOT / "var" / "bench" / "remote"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/bench_remote"
SETUPS = ("orm-postgres", "orm-sqlite")
# What would change the long poll: the defaults in settings_remote.py apply.
REMOTE_VARIABLES = ("REMOTE_LONG_POLL_MAX_SECONDS", "REMOTE_LONG_POLL_CONCURRENCY")
URL = "/api/approval-requests/"
WAIT_S = 30
TIMEOUT_S = 60.0


def hitl_value(index: int) -> dict[str, Any]:
    """A LangChain HITLRequest of one refund_order call (tier write in the demo policy)."""
    args = {"order_id": f"o-{index}", "amount": 20, "reason": "damaged", "sku": "S-1"}
    return {
        "action_requests": [{"name": "refund_order", "args": args}],
        "review_configs": [
            {"action_name": "refund_order", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }


class Receiver:
    """The agent's callback endpoint: verifies each signature, notes when each request's
    callback arrived (perf_counter and wall clock), answers 204."""

    def __init__(self, secret: str = "") -> None:
        self.secret = secret
        self.arrived: dict[str, tuple[float, float]] = {}
        self.refused = 0
        self.event = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                at = time.perf_counter(), time.time()
                receiver.note(body, dict(self.headers.items()), at)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/console"

    def note(self, body: bytes, headers: dict[str, str], at: tuple[float, float]) -> None:
        from approval_console_client.webhooks import WebhookVerificationError, verify_webhook

        try:
            event = verify_webhook(
                body, {k.lower(): v for k, v in headers.items()}, secret=self.secret
            )
        except WebhookVerificationError:
            with self.event:
                self.refused += 1
            return
        with self.event:
            self.arrived.setdefault(str(event["id"]), at)
            self.event.notify_all()

    def wait_for(self, request_id: str, timeout: float) -> tuple[float, float]:
        with self.event:
            if not self.event.wait_for(lambda: request_id in self.arrived, timeout=timeout):
                raise AssertionError(
                    f"no callback for {request_id} in {timeout} s (refused: {self.refused})"
                )
            return self.arrived[request_id]


def agent_register(callback_url: str) -> tuple[Any, str]:
    """The external agent as an admin registers it (any tool), and one key."""
    from agents.remote.models import ExternalAgent
    from agents.remote.registry import external_agent_key_issue, external_agent_save

    agent = external_agent_save(
        agent=ExternalAgent(name="bench", callback_url=callback_url), actor="system:bench"
    )
    return agent, external_agent_key_issue(agent=agent, actor="system:bench")[1]


def agent_http(base_url: str, key: str) -> Any:
    import httpx

    return httpx.Client(
        base_url=base_url, headers={"Authorization": f"Agent {key}"}, timeout=WAIT_S + 15
    )


def checked(response: Any, status: int) -> dict[str, Any]:
    if response.status_code != status:
        raise AssertionError(
            f"{response.request.method} {response.request.url} -> {response.status_code}, "
            f"expected {status}: {response.text[:1000]}"
        )
    return response.json()


def timed(call: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def requests_measure(http: Any, count: int, tag: str) -> dict[str, list[float]]:
    """POST new requests, the same bodies again (200), and the anchor GET of each."""
    bodies = [
        {"thread_id": f"{tag}-t-{i}", "interrupt_id": "i-1", "value": hitl_value(i)}
        for i in range(count)
    ]
    created, retried, got = [], [], []
    ids = []
    for body in bodies:
        response, seconds = timed(lambda body=body: http.post(URL, json=body))
        ids.append(checked(response, 201)["id"])
        created.append(seconds)
    for body in bodies:
        response, seconds = timed(lambda body=body: http.post(URL, json=body))
        checked(response, 200)
        retried.append(seconds)
    for request_id in ids:
        response, seconds = timed(lambda request_id=request_id: http.get(f"{URL}{request_id}/"))
        checked(response, 200)
        got.append(seconds)
    return {"new": created, "retry": retried, "get": got}


def decision_round_trip(
    stack: dict[str, Any], http: Any, poller: Any, receiver: Receiver, index: int, tag: str
) -> dict[str, float]:
    """One request decided by bob; seconds until the long poll and the callback know."""
    from audit.models import AuditEvent

    body = {"thread_id": f"{tag}-d-{index}", "interrupt_id": "i-1", "value": hitl_value(index)}
    opened = checked(http.post(URL, json=body), 201)
    request_id, approval = opened["id"], opened["approvals"][0]
    polled: dict[str, Any] = {}

    def long_poll() -> None:
        try:
            response = poller.get(f"{URL}{request_id}/", params={"wait": WAIT_S})
            polled["at"] = time.perf_counter(), time.time()
            polled["response"] = response
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            polled["error"] = error

    thread = threading.Thread(target=long_poll, daemon=True)
    thread.start()
    time.sleep(0.75 + random.uniform(0, 0.5))  # the poll is waiting, at a random phase
    decided = time.perf_counter()
    decision = {"decision": "approve", "payload_hash": approval["payload_hash"]}
    stack["bob"].post(f"/api/approvals/{approval['id']}/decision/", decision, expect=200)
    posted = time.perf_counter()
    thread.join(timeout=WAIT_S + 20)
    if "error" in polled or "response" not in polled:
        raise AssertionError(f"the long poll of {request_id} failed: {polled.get('error')}")
    response = polled["response"]
    answer = checked(response, 200)
    if answer["status"] != "decided" or "Retry-After" in response.headers:
        raise AssertionError(f"the long poll answered {answer['status']}, {response.headers}")
    called = receiver.wait_for(request_id, TIMEOUT_S)
    run_id = opened["run_id"]
    marks = dict(
        AuditEvent.objects.filter(
            run_id=run_id, action__in=("approval.decided", "remote.decided")
        ).values_list("action", "at")
    )
    closed = marks["remote.decided"].timestamp()
    return {
        "long poll": polled["at"][0] - decided,
        "callback": called[0] - decided,
        "decision HTTP call (client)": posted - decided,
        "approval.decided -> remote.decided (queue hop, advance)": (
            marks["remote.decided"] - marks["approval.decided"]
        ).total_seconds(),
        "remote.decided -> long poll answered": polled["at"][1] - closed,
        "remote.decided -> callback received": called[1] - closed,
    }


def ms(values: list[float], share: float | None = None) -> float:
    if share is None:
        return statistics.median(values) * 1000
    return percentile(values, share) * 1000


def setup_measure(setup: str) -> int:
    requests = int(os.environ.get("BENCH_REQUESTS", "50"))
    decisions = int(os.environ.get("BENCH_DECISIONS", "10"))
    os.environ.setdefault("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL)
    for name in REMOTE_VARIABLES:
        os.environ.pop(name, None)
    scratch = SCRATCH / setup
    setup_environment(setup, scratch)
    receiver = Receiver()
    receiver.thread.start()
    try:
        with stack_running(scratch) as stack:
            from django.conf import settings

            procs = [stack["web"], stack["worker"]]
            agent, key = agent_register(receiver.url)
            receiver.secret = agent.callback_secret
            base = stack["web"].base_url
            with agent_http(base, key) as http, agent_http(base, key) as poller:
                requests_measure(http, 3, "warm")  # imports, connections, the first run
                decision_round_trip(stack, http, poller, receiver, 0, "warm")
                task_round_trip(procs)
                timings = requests_measure(http, requests, "bench")
                rounds = [
                    decision_round_trip(stack, http, poller, receiver, i, "bench")
                    for i in range(decisions)
                ]
                tasks = [task_round_trip(procs) for _ in range(decisions)]
            poll = settings.Q_CLUSTER["poll"]
            listen = settings.Q_CLUSTER.get("broker_class", "")
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    section(
        f"{setup}: remote approval service, ORM broker (poll {poll} s{', LISTEN' if listen else ''}),"
        f" {requests} requests, {decisions} decisions (p50, p95)"
    )
    get_anchor = ("agent's GET of one request", ms(timings["get"]))
    figure(f"{setup} anchor: agent GET /api/approval-requests/{{id}}/ p50", get_anchor[1], "ms")
    task_anchor = ("no-op task round trip", ms(tasks))
    figure(f"{setup} anchor: no-op async_task enqueue -> result saved p50", task_anchor[1], "ms")
    for label, values in (
        ("POST new request (201)", timings["new"]),
        ("POST retry (200)", timings["retry"]),
    ):
        figure(f"{setup} {label} p50", ms(values), "ms", anchor=get_anchor)
        figure(f"{setup} {label} p95", ms(values, 0.95), "ms", anchor=get_anchor)
    for label in ("long poll", "callback"):
        values = [r[label] for r in rounds]
        figure(f"{setup} decision -> {label} knows p50", ms(values), "ms", anchor=task_anchor)
        figure(f"{setup} decision -> {label} knows p95", ms(values, 0.95), "ms", anchor=task_anchor)
    print(f"  where it goes, p50 of {decisions} decisions:")
    for label in list(rounds[0])[2:]:
        figure(f"  {label}", ms([r[label] for r in rounds]), "ms")
    return 0


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("both", "postgres", "sqlite"), default="both")
    parser.add_argument("--sqlite", action="store_true", help="SQLite only (as --db sqlite)")
    parser.add_argument("--requests", type=int, help="new requests (BENCH_REQUESTS, 50)")
    parser.add_argument("--decisions", type=int, help="decisions (BENCH_DECISIONS, 10)")
    return parser.parse_args()


def main() -> int:
    if not os.environ.get("BENCH_REMOTE_SETUP"):
        args = arguments()
        db = "sqlite" if args.sqlite else args.db
        if db != "both":
            os.environ["BENCH_SETUPS"] = f"orm-{db}"
        if args.requests:
            os.environ["BENCH_REQUESTS"] = str(args.requests)
        if args.decisions:
            os.environ["BENCH_DECISIONS"] = str(args.decisions)
    return setups_each(
        script=__file__, setups=SETUPS, variable="BENCH_REMOTE_SETUP", measure=setup_measure
    )


if __name__ == "__main__":
    raise SystemExit(main())
