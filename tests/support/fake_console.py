"""An in-memory stand-in for the console's agent API (/api/approval-requests/), for the
client's unit tests over ``httpx.MockTransport``. It answers as the wire contract says: 201
new / 200 retry / 409 other value; GET (long poll returns at once); outcome 201 / 200 / 409.
The real server is exercised by tests/e2e/test_remote_agent_e2e.py."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

KEY = "agk_" + "k" * 43


@dataclass
class FakeConsole:
    key: str = KEY
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    outcomes: dict[int, dict[str, Any]] = field(default_factory=dict)
    calls: list[httpx.Request] = field(default_factory=list)
    next_approval: int = 1

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        if request.headers.get("Authorization") != f"Agent {self.key}":
            return httpx.Response(401, json={"detail": "Invalid agent key."})
        path = request.url.path
        if path == "/api/approval-requests/" and request.method == "POST":
            return self._create(json.loads(request.content))
        parts = path.strip("/").split("/")
        if len(parts) >= 3 and parts[:2] == ["api", "approval-requests"]:
            found = self.requests.get(parts[2])
            if found is None:
                return httpx.Response(404, json={"detail": "Not found."})
            if len(parts) == 3 and request.method == "GET":
                return httpx.Response(200, json=found)
            if parts[3:] == ["outcome"] and request.method == "POST":
                return self._outcome(found, json.loads(request.content))
        return httpx.Response(404, json={"detail": "Not found."})

    def _create(self, body: dict[str, Any]) -> httpx.Response:
        for field_name in ("thread_id", "interrupt_id", "value"):
            if field_name not in body:
                return httpx.Response(400, json={field_name: ["This field is required."]})
        for found in self.requests.values():
            if (found["thread_id"], found["interrupt_id"]) == (
                body["thread_id"],
                body["interrupt_id"],
            ):
                if found["_value"] != body["value"]:
                    return httpx.Response(409, json={"detail": "Another value for these ids."})
                return httpx.Response(200, json=found)
        request_id = str(uuid.uuid4())
        actions = body["value"].get("action_requests", [])
        approvals = []
        for index, action in enumerate(actions):
            seed = f"{body['thread_id']}:{body['interrupt_id']}:{index}"
            approvals.append(
                {
                    "id": self.next_approval,
                    "action_index": index,
                    "tool": action["name"],
                    "tier": "write",
                    "status": "pending",
                    "payload_hash": hashlib.sha256(json.dumps(action).encode()).hexdigest(),
                    "idempotency_key": "cak_" + hashlib.sha256(seed.encode()).hexdigest()[:40],
                    "url": f"https://console/approvals/{self.next_approval}/",
                    "decision": None,
                }
            )
            self.next_approval += 1
        self.requests[request_id] = {
            "id": request_id,
            "thread_id": body["thread_id"],
            "interrupt_id": body["interrupt_id"],
            "run_id": str(uuid.uuid4()),
            "status": "pending",
            "protocol": "langchain.hitl",
            "approvals": approvals,
            "resume": None,
            "created_at": "2026-12-05T04:00:00Z",
            "decided_at": None,
            "_value": body["value"],
            "_body": body,
        }
        return httpx.Response(201, json=self.requests[request_id])

    def _outcome(self, found: dict[str, Any], body: dict[str, Any]) -> httpx.Response:
        approval = next((a for a in found["approvals"] if a["id"] == body["approval_id"]), None)
        if approval is None or approval["idempotency_key"] != body["idempotency_key"]:
            return httpx.Response(409, json={"detail": "Not this request's approval or key."})
        if body["approval_id"] in self.outcomes:
            if self.outcomes[body["approval_id"]] != body:
                return httpx.Response(409, json={"detail": "Another outcome was reported."})
            return httpx.Response(200, json=found)
        self.outcomes[body["approval_id"]] = body
        approval["outcome"] = {"status": body["status"], "args_match": True, "flags": []}
        return httpx.Response(201, json=found)

    def decide(self, request_id: str, decisions: list[dict[str, Any]]) -> dict[str, Any]:
        """Decide every approval of a request, as people in the console would."""
        found = self.requests[request_id]
        for approval, decision in zip(found["approvals"], decisions, strict=True):
            approval["status"] = {"approve": "approved", "edit": "edited"}.get(
                decision["type"], decision["type"] + "ed"
            )
        found.update(status="decided", resume={"decisions": decisions})
        found["decided_at"] = "2026-12-05T04:01:00Z"
        return found

    def only(self) -> dict[str, Any]:
        (found,) = self.requests.values()
        return found
