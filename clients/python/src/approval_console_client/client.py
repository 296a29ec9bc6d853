"""``ConsoleClient``: ask the approval console about an agent's actions over its REST API."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from . import webhooks
from .errors import ConsoleError, ConsoleUnavailable, error_for
from .models import RemoteRequest, resume_value

LONG_POLL_MAX_SECONDS = 30
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# A long poll answered early while still pending (the console is busy): wait this long first.
EARLY_ANSWER_PAUSE_SECONDS = 2.0


class ConsoleClient:
    """A client for one external agent, authenticated by its key (``Authorization: Agent``).

    Every call is safe to repeat (a create is idempotent on thread + interrupt, an outcome
    report on its approval), so connection errors, 429 and 5xx answers are retried
    ``retries`` times with exponential backoff (``backoff`` seconds, doubling).
    """

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        retries: int = 3,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        long_poll_max: int = LONG_POLL_MAX_SECONDS,
    ) -> None:
        if not key:
            raise ValueError("key is required (the agent's key, agk_...)")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep
        # The console's REMOTE_LONG_POLL_MAX_SECONDS, if it was lowered (a longer wait is a 400).
        self.long_poll_max = long_poll_max
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={
                "Authorization": f"Agent {key}",
                "Accept": "application/json",
                "User-Agent": "approval-console-client/0.1.0",
            },
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ConsoleClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the API -------------------------------------------------------------------------

    def create(
        self,
        thread_id: str,
        interrupt_id: str,
        value: Any,
        *,
        response_schema: Any = None,
        evidence: list[Any] | None = None,
        rationale: str = "",
        blast_radius: str = "",
        callback_url: str | None = None,
        run_input: dict[str, Any] | None = None,
    ) -> RemoteRequest:
        """Register an interrupt with the console (or find it again: same ids, same value).

        ``value`` is the interrupt value in any payload the console reads (LangChain
        ``HITLRequest`` / ``ToolApprovalRequest``, Agent Inbox ``HumanInterrupt``, the
        console's own). Raises ``Conflict`` for the same ids with another value, ``Forbidden``
        for a tool the agent may not ask about, ``BadRequest`` naming a field.
        """
        body: dict[str, Any] = {
            "thread_id": thread_id,
            "interrupt_id": interrupt_id,
            "value": value,
        }
        if response_schema is not None:
            body["response_schema"] = response_schema
        if evidence:
            body["evidence"] = list(evidence)
        if rationale:
            body["rationale"] = rationale
        if blast_radius:
            body["blast_radius"] = blast_radius
        if callback_url:
            body["callback_url"] = callback_url
        if run_input is not None:
            body["run_input"] = run_input
        status, answer = self._call("POST", "/api/approval-requests/", json=body)
        return RemoteRequest.from_body(answer, created=status == 201)

    def get(self, request_id: str, *, wait: int = 0) -> RemoteRequest:
        """The request now, or (``wait`` > 0) as soon as it is decided, at most ``wait`` s."""
        wait = max(0, min(int(wait), self.long_poll_max))
        params = {"wait": wait} if wait else None
        _, answer = self._call(
            "GET",
            f"/api/approval-requests/{request_id}/",
            params=params,
            timeout=self.timeout + wait,
        )
        return RemoteRequest.from_body(answer)

    def list(self, *, thread_id: str | None = None) -> list[RemoteRequest]:
        """This agent's requests (of one thread), every page."""
        params: dict[str, Any] | None = {"thread_id": thread_id} if thread_id else None
        path: str | None = "/api/approval-requests/"
        found: list[RemoteRequest] = []
        while path:
            _, page = self._call("GET", path, params=params)
            found += [RemoteRequest.from_body(item) for item in page.get("results", [])]
            path, params = page.get("next"), None
        return found

    def wait(
        self, request_id: str, *, timeout: float | None = None, poll: int = 30
    ) -> RemoteRequest:
        """Long-poll until the request is no longer pending, or ``timeout`` seconds passed.

        Returns the request either way: check ``status`` (``timeout=None`` waits forever).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = max(1, min(int(poll), self.long_poll_max))
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return self.get(request_id)
                step = max(1, min(step, math.ceil(remaining)))
            started = time.monotonic()
            request = self.get(request_id, wait=step)
            if not request.is_pending:
                return request
            if time.monotonic() - started < step / 2:
                # Answered early while still pending (the console's long polls are all taken:
                # it said Retry-After): pause before the next poll, never a busy loop.
                pause = EARLY_ANSWER_PAUSE_SECONDS
                if deadline is not None:
                    pause = min(pause, max(0.0, deadline - time.monotonic()))
                self._sleep(pause)

    def report_outcome(
        self,
        request_id: str,
        *,
        approval_id: int,
        idempotency_key: str,
        executed_args: dict[str, Any],
        result: Any,
        status: str = "succeeded",
    ) -> RemoteRequest:
        """Tell the console what ran for an approval (``status``: succeeded or failed).

        Returns the request, its approval now carrying the ``outcome`` (``args_match``, and
        ``flags`` such as ``args_differ`` when the executed args are not the approved ones).
        Reporting the same outcome again is fine; a different one raises ``Conflict``.
        """
        if status not in ("succeeded", "failed"):
            raise ValueError("status must be 'succeeded' or 'failed'")
        _, answer = self._call(
            "POST",
            f"/api/approval-requests/{request_id}/outcome/",
            json={
                "approval_id": approval_id,
                "idempotency_key": idempotency_key,
                "executed_args": executed_args,
                "result": result,
                "status": status,
            },
        )
        return RemoteRequest.from_body(answer)

    def finish(
        self,
        thread_id: str,
        *,
        status: str = "completed",
        output: dict[str, Any] | None = None,
        error: str = "",
    ) -> dict[str, Any]:
        """Tell the console the thread is over: its run shows completed (or failed) there.

        Until then the run shows as running between requests. Safe to repeat; a request of
        the thread still pending, or another end, raises ``Conflict``; after it the thread
        takes no new request.
        """
        if status not in ("completed", "failed"):
            raise ValueError("status must be 'completed' or 'failed'")
        _, answer = self._call(
            "POST",
            "/api/approval-requests/threads/finish/",
            json={"thread_id": thread_id, "status": status, "output": output or {}, "error": error},
        )
        return answer

    # -- helpers that need no network ----------------------------------------------------

    @staticmethod
    def verify_webhook(
        body: bytes | str, headers: Mapping[str, str] | Any, *, secret: str
    ) -> dict[str, Any]:
        """The callback's body once its Standard Webhooks signature checks out (see webhooks)."""
        return webhooks.verify_webhook(body, headers, secret=secret)

    @staticmethod
    def resume_value(body_or_request: RemoteRequest | dict[str, Any] | bytes | str) -> Any:
        """What to pass to ``Command(resume=...)`` for a decided request."""
        return resume_value(body_or_request)

    # -- transport -----------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, Any]:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._http.request(
                    method, path, json=json, params=params, timeout=timeout or self.timeout
                )
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise ConsoleUnavailable(None, repr(exc)) from exc
            else:
                if response.status_code < 400:
                    return response.status_code, _json(response)
                if response.status_code not in RETRY_STATUSES or attempt >= self.retries:
                    raise error_for(response.status_code, _json(response))
            self._sleep(self._delay(attempt, response))
            attempt += 1

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        delay = self.backoff * (2**attempt)
        if response is not None and (after := response.headers.get("Retry-After", "")).isdigit():
            delay = max(delay, min(float(after), 60.0))
        return delay


def _json(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


__all__ = ["ConsoleClient", "ConsoleError"]
