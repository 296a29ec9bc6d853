"""The agent's own tiny web service: start runs, take the console's callbacks, show runs.

- ``POST /runs`` ``{"input": "Refund 1250 cents for order A-1"}`` -> 201 ``{"thread_id",
  "status", "console_request_ids"}``: the run goes until the console's gate pauses it.
- ``POST /callbacks/console``: a decided (or cancelled) approval request, signed by the
  console (Standard Webhooks); checked with ``CONSOLE_CALLBACK_SECRET``, answered 204 at
  once, the thread resumed in a worker thread. A bad signature: 401.
- ``GET /runs/<thread_id>``: the thread's status, messages and the payments table.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from approval_console_client import ConsoleClient, ConsoleError, WebhookVerificationError
from approval_console_client.middleware import pending_request_ids
from approval_console_client.webhooks import secret_key
from langgraph.types import Command

from .agent import agent_build
from .payments import Payments

log = logging.getLogger("remote_agent")


@dataclass(frozen=True)
class Settings:
    console_url: str
    agent_key: str
    callback_secret: str
    port: int = 8700
    data_dir: Path = Path("var/remote_agent")
    callback_url: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        missing = [
            name
            for name in ("CONSOLE_URL", "CONSOLE_AGENT_KEY", "CONSOLE_CALLBACK_SECRET")
            if not env.get(name)
        ]
        if missing:
            raise SystemExit(f"remote_agent: set {', '.join(missing)}")
        try:
            port = int(env.get("PORT", "8700"))
        except ValueError:
            raise SystemExit("remote_agent: PORT must be an integer") from None
        try:
            secret_key(env["CONSOLE_CALLBACK_SECRET"])
        except WebhookVerificationError as exc:
            raise SystemExit(f"remote_agent: CONSOLE_CALLBACK_SECRET: {exc}") from None
        return cls(
            console_url=env["CONSOLE_URL"],
            agent_key=env["CONSOLE_AGENT_KEY"],
            callback_secret=env["CONSOLE_CALLBACK_SECRET"],
            port=port,
            data_dir=Path(env.get("DATA_DIR") or "var/remote_agent"),
            callback_url=env.get("AGENT_CALLBACK_URL") or None,
        )


class AgentService:
    """The agent graph, its payments, and what its threads are doing."""

    def __init__(self, settings: Settings, *, client: ConsoleClient | None = None) -> None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.client = client or ConsoleClient(settings.console_url, settings.agent_key)
        self.payments = Payments(settings.data_dir / "payments.sqlite")
        self.graph = agent_build(
            client=self.client,
            payments=self.payments,
            checkpoint_path=settings.data_dir / "checkpoints.sqlite",
            callback_url=settings.callback_url,
        )
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self.busy: set[str] = set()
        self.failed: dict[str, str] = {}
        self.cancelled: set[str] = set()

    @staticmethod
    def config(thread_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread_id}}

    def _lock(self, thread_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(thread_id, threading.Lock())

    def run_start(self, text: str, *, thread_id: str | None = None) -> dict[str, Any]:
        thread_id = thread_id or uuid.uuid4().hex
        with self._lock(thread_id):
            result = self.graph.invoke(
                {"messages": [{"role": "user", "content": text}]}, self.config(thread_id)
            )
        return {
            "thread_id": thread_id,
            "status": self.run_status(thread_id),
            "console_request_ids": pending_request_ids(result),
        }

    def callback(self, body: bytes, headers: Any) -> dict[str, Any]:
        """Check a callback and start resuming its thread; raises WebhookVerificationError."""
        event = self.client.verify_webhook(body, headers, secret=self.settings.callback_secret)
        thread_id = event.get("thread_id", "")
        if event.get("status") == "cancelled":
            self.cancelled.add(thread_id)
        elif event.get("status") == "decided":
            threading.Thread(
                target=self.resume, args=(thread_id, event), name=f"resume-{thread_id}"
            ).start()
        return event

    def resume(self, thread_id: str, event: dict[str, Any]) -> None:
        """Resume the thread with the decision, if it still waits on that request."""
        config = self.config(thread_id)
        with self._lock(thread_id):
            if event.get("id") not in pending_request_ids(self.graph.get_state(config)):
                log.info(
                    "callback for %s: thread %s does not wait on it", event.get("id"), thread_id
                )
                return
            self.busy.add(thread_id)
            try:
                result = self.graph.invoke(Command(resume=self.client.resume_value(event)), config)
                self.failed.pop(thread_id, None)
            except Exception as exc:  # noqa: BLE001 - shown on GET /runs/<thread>
                log.exception("resuming thread %s failed", thread_id)
                self.failed[thread_id] = repr(exc)
                return
            finally:
                self.busy.discard(thread_id)
            if not pending_request_ids(result):  # the thread is over: its run is, in the console
                self.finish(thread_id, result)

    def finish(self, thread_id: str, result: dict[str, Any]) -> None:
        messages = result.get("messages") or []
        answer = str(getattr(messages[-1], "content", "")) if messages else ""
        try:
            self.client.finish(thread_id, output={"answer": answer})
        except ConsoleError:  # the console keeps showing it running; logged, never fatal
            log.exception("telling the console that thread %s is over failed", thread_id)

    def run_status(self, thread_id: str) -> str:
        if thread_id in self.busy:
            return "running"
        if thread_id in self.failed:
            return "failed"
        if thread_id in self.cancelled:
            return "cancelled"
        snapshot = self.graph.get_state(self.config(thread_id))
        if not snapshot.values:
            return "unknown"
        return "waiting" if snapshot.interrupts else "completed"

    def run_state(self, thread_id: str) -> dict[str, Any] | None:
        snapshot = self.graph.get_state(self.config(thread_id))
        if not snapshot.values:
            return None
        return {
            "thread_id": thread_id,
            "status": self.run_status(thread_id),
            "error": self.failed.get(thread_id),
            "console_request_ids": pending_request_ids(snapshot),
            "messages": [
                {"type": m.type, "text": m.text} for m in snapshot.values.get("messages", [])
            ],
            "payments": self.payments.all(),
        }


def handler_for(service: AgentService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "remote-agent/0.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            log.info("%s %s", self.address_string(), format % args)

        def _send(self, status: int, body: Any = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_POST(self) -> None:  # noqa: N802
            raw = self._body()
            if self.path == "/callbacks/console":
                try:
                    service.callback(raw, self.headers)
                except WebhookVerificationError as exc:
                    return self._send(401, {"detail": str(exc)})
                return self._send(204)
            if self.path == "/runs":
                try:
                    payload = json.loads(raw or b"{}")
                except ValueError:
                    return self._send(400, {"input": "the body is not JSON"})
                text = payload.get("input") if isinstance(payload, dict) else None
                if not isinstance(text, str) or not text.strip():
                    return self._send(400, {"input": "required: the request, as text"})
                try:
                    return self._send(
                        201, service.run_start(text, thread_id=payload.get("thread_id"))
                    )
                except ConsoleError as exc:
                    return self._send(502, {"detail": f"the console: {exc}"})
            return self._send(404, {"detail": "not found"})

        def do_GET(self) -> None:  # noqa: N802
            if self.path.startswith("/runs/"):
                state = service.run_state(self.path.removeprefix("/runs/").strip("/"))
                return (
                    self._send(200, state) if state else self._send(404, {"detail": "no such run"})
                )
            if self.path == "/health":
                return self._send(200, {"ok": True})
            return self._send(404, {"detail": "not found"})

    return Handler


def serve(settings: Settings) -> None:
    service = AgentService(settings)
    server = ThreadingHTTPServer(("127.0.0.1", settings.port), handler_for(service))
    log.info(
        "remote agent on http://127.0.0.1:%s/ (console %s)", settings.port, settings.console_url
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    serve(Settings.from_env())
