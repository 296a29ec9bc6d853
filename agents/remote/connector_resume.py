"""Resuming Agent Server threads once their approval requests are decided (the connector's
second half; ``agents.remote.connector`` opens the requests).

Each decided request is resumed exactly once: a ``ConnectorResume`` row is the claim, written
before ``runs.create(command={"resume": {interrupt_id: value}})`` and marked delivered after
it. A claim left ``sending`` by a crash (or ``failed`` by an error) is taken again on a later
pass, and the thread's pending interrupts decide: an interrupt the thread no longer waits on
was delivered (or answered elsewhere) and is not sent again; a thread the server no longer
has (404) takes nothing more. A request closed as cancelled (its run cancelled in the console)
is told the same way, with a reject of every action in its protocol (never the decision).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from httpx import HTTPStatusError
from langgraph_sdk import get_sync_client

from agents.hitl import protocol
from agents.remote.connector_models import AgentServerConnector, ConnectorResume
from agents.remote.models import RemoteRequest
from approvals.contract import EXTERNAL_AGENT_PREFIX
from audit.services import event_record

# A claim still ``sending`` after this long was left by a crash: a later pass settles it.
RESUME_STALE_SECONDS = 120
# Seconds for one call to the Agent Server (connect, read).
CALL_TIMEOUT_SECONDS = 30.0
ERROR_CHARS = 2000
# What the thread of a request closed as cancelled is resumed with (a reject of every action).
CANCELLED_MESSAGE = "cancelled in the approval console"
# The requests the connector tells their thread: decided, or closed as cancelled.
TOLD_STATUSES = (RemoteRequest.Status.DECIDED, RemoteRequest.Status.CANCELLED)


def connector_client(connector: AgentServerConnector) -> Any:
    """The SDK client for a deployment (the one patch point for the Agent Server). An empty key
    sends none: never the console's own LANGSMITH_API_KEY from the environment."""
    return get_sync_client(
        url=connector.url, api_key=connector.api_key or None, timeout=CALL_TIMEOUT_SECONDS
    )


def public_url(url: str) -> str:
    """The URL without its user name and password (what runs, audit and pages may show)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


def redacted(connector: AgentServerConnector, text: str) -> str:
    """An error text without the URL's password or the API key (an error may quote either)."""
    secrets = [urlsplit(connector.url).password or "", connector.api_key or ""]
    for secret in filter(None, secrets):
        text = text.replace(secret, "***")
    return text[:ERROR_CHARS]


def thread_interrupts(thread: dict[str, Any]) -> list[dict[str, Any]]:
    """A thread's pending interrupts (``{id, value}``), from its ``interrupts`` by task."""
    raw = thread.get("interrupts") or {}
    groups: Iterable[Any] = raw.values() if isinstance(raw, dict) else [raw]
    return [
        i
        for group in groups
        for i in (group if isinstance(group, list) else [group])
        if isinstance(i, dict) and i.get("id")
    ]


def connector_for_agent(agent_name: str) -> AgentServerConnector | None:
    """The active connector of the external agent called ``agent_name``, if any."""
    return (
        AgentServerConnector.objects.filter(agent__name=agent_name, is_active=True)
        .select_related("agent")
        .first()
    )


def connector_resume_run(*, run: Any) -> int:
    """The hook in ``remote_run_advance``: resume the run's thread on its Agent Server if the
    run's agent has a connector. Never raises: errors go to the connector's ``last_error``."""
    connector = connector_for_agent(run.agent.removeprefix(EXTERNAL_AGENT_PREFIX))
    if connector is None:
        return 0
    try:
        resumed, errors = connector_resume_decided(connector=connector, run=run)
    except Exception as exc:  # the advance itself must go on
        resumed, errors = 0, [f"{type(exc).__name__}: {exc}"]
    if errors:
        AgentServerConnector.objects.filter(pk=connector.pk).update(
            last_error=redacted(connector, "\n".join(errors))
        )
    return resumed


def connector_resume_decided(
    *, connector: AgentServerConnector, client: Any = None, run: Any = None
) -> tuple[int, list[str]]:
    """Resume every decided (or cancelled), not yet delivered request of the connector's agent
    (of ``run`` only, if given), one ``runs.create`` per thread; (requests delivered, errors)."""
    remotes = RemoteRequest.objects.filter(agent=connector.agent, status__in=TOLD_STATUSES).exclude(
        connector_resume__status=ConnectorResume.Status.DELIVERED
    )
    if run is not None:
        remotes = remotes.filter(run=run)
    by_thread: dict[str, list[RemoteRequest]] = {}
    for remote in remotes.order_by("decided_at")[: connector.max_threads]:
        by_thread.setdefault(remote.thread_id, []).append(remote)
    if not by_thread:
        return 0, []
    client = client or connector_client(connector)
    delivered, errors = 0, []
    for thread_id, waiting in by_thread.items():
        try:
            delivered += _resume_thread(connector, client, thread_id, waiting)
        except Exception as exc:
            errors.append(f"resume of thread {thread_id}: {type(exc).__name__}: {exc}")
    return delivered, errors


def _resume_thread(
    connector: AgentServerConnector, client: Any, thread_id: str, waiting: list[RemoteRequest]
) -> int:
    try:
        thread = client.threads.get(thread_id)
    except HTTPStatusError as exc:
        if exc.response.status_code != 404:
            raise
        thread = {}  # deleted on the server: no interrupt of it waits any more
    if thread.get("status") == "busy":
        return 0  # a run is going on this thread: the next pass looks again
    pending = {str(i["id"]) for i in thread_interrupts(thread)}
    sending: list[tuple[RemoteRequest, ConnectorResume]] = []
    for remote in waiting:
        claim = _claim(connector, remote)
        if claim is None:
            continue  # delivered, or another worker's fresh claim
        if remote.interrupt_id not in pending:
            # The thread waits on it no more: delivered before a crash, or answered elsewhere
            # (or the thread is gone).
            note = "not pending any more" if thread else "thread not found"
            _delivered(connector, remote, claim, server_run_id="", note=note)
            continue
        sending.append((remote, claim))
    if not sending:
        return 0
    metadata = thread.get("metadata") or {}
    assistant = metadata.get("assistant_id") or metadata.get("graph_id") or connector.graph_ids[0]
    command = {"resume": {remote.interrupt_id: resume_of(remote) for remote, _ in sending}}
    try:
        server_run = client.runs.create(thread_id, str(assistant), command=command)
    except Exception as exc:
        for _, claim in sending:
            ConnectorResume.objects.filter(
                pk=claim.pk, status=ConnectorResume.Status.SENDING
            ).update(status=ConnectorResume.Status.FAILED, last_error=redacted(connector, f"{exc}"))
        raise
    for remote, claim in sending:
        _delivered(connector, remote, claim, server_run_id=str(server_run.get("run_id", "")))
    return len(sending)


def resume_of(remote: RemoteRequest) -> Any:
    """What the thread is resumed with: the decision's value, or for a request closed as
    cancelled a reject of every action in the interrupt's protocol."""
    if remote.status == RemoteRequest.Status.CANCELLED:
        return protocol.reject_value(value=remote.value, message=CANCELLED_MESSAGE)
    return remote.resume


def _claim(connector: AgentServerConnector, remote: RemoteRequest) -> ConnectorResume | None:
    """Take the right to send this request's resume: a new claim, or a failed or stale one."""
    now = timezone.now()
    claim, created = ConnectorResume.objects.get_or_create(
        remote=remote, defaults={"connector": connector, "claimed_at": now}
    )
    if created:
        return claim
    stale = now - dt.timedelta(seconds=RESUME_STALE_SECONDS)
    retake = Q(status=ConnectorResume.Status.FAILED) | Q(
        status=ConnectorResume.Status.SENDING, claimed_at__lt=stale
    )
    moved = ConnectorResume.objects.filter(retake, pk=claim.pk).update(
        status=ConnectorResume.Status.SENDING, claimed_at=now, attempts=F("attempts") + 1
    )
    return ConnectorResume.objects.get(pk=claim.pk) if moved else None


def _delivered(
    connector: AgentServerConnector,
    remote: RemoteRequest,
    claim: ConnectorResume,
    *,
    server_run_id: str,
    note: str = "",
) -> None:
    with transaction.atomic():
        moved = ConnectorResume.objects.filter(
            pk=claim.pk, status=ConnectorResume.Status.SENDING
        ).update(
            status=ConnectorResume.Status.DELIVERED,
            delivered_at=timezone.now(),
            server_run_id=server_run_id,
            last_error=note,
        )
        if not moved:
            return
        event_record(
            action="remote.resumed",
            actor=f"connector:{connector.name}",
            run_id=remote.run_id,
            data={
                "request_id": str(remote.id),
                "thread_id": remote.thread_id,
                "interrupt_id": remote.interrupt_id,
                "connector": connector.name,
                "server_run_id": server_run_id or None,
                "note": note,
                "attempts": claim.attempts,
                "cancelled": remote.status == RemoteRequest.Status.CANCELLED,
            },
        )
