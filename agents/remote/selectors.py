"""Reads of the remote approval service: an agent reads only its own requests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from agents.remote.connector_models import ConnectorResume
from agents.remote.models import ExternalAgent, RemoteRequest


def remote_request_list(
    *, fetched_by: ExternalAgent, thread_id: str | None = None
) -> QuerySet[RemoteRequest]:
    requests = RemoteRequest.objects.filter(agent=fetched_by).select_related("run")
    if thread_id:
        requests = requests.filter(thread_id=thread_id)
    return requests


def remote_request_get(*, pk: Any, fetched_by: ExternalAgent) -> RemoteRequest:
    """The agent's own request; DoesNotExist for another agent's (never told apart)."""
    return RemoteRequest.objects.select_related("run", "agent").get(pk=pk, agent=fetched_by)


def remote_requests_of_run(*, run_id: Any) -> QuerySet[RemoteRequest]:
    """A run's requests (its pages show them: the run's visibility was checked by the caller)."""
    return RemoteRequest.objects.filter(run_id=run_id).order_by("created_at", "id")


def remote_told_expression(before: dt.datetime | None = None) -> Exists:
    """True for an approval whose request was closed as decided (before ``before`` if given):
    its agent was told the decision, so an outcome is expected (approvals' stuck sweep). Not
    while the request waits on another of its actions, nor once it was closed as cancelled."""
    told = RemoteRequest.objects.filter(
        run_id=OuterRef("run_id"),
        approval_interrupt_id=OuterRef("interrupt_id"),
        status=RemoteRequest.Status.DECIDED,
    )
    if before is not None:
        told = told.filter(decided_at__lt=before)
    return Exists(told)


def remote_connector_told_expression() -> Exists:
    """True for an approval whose request an Agent Server connector delivered to its thread:
    the graph goes on there and has no way to report an outcome, so none is awaited
    (approvals' stuck sweep)."""
    return Exists(
        RemoteRequest.objects.filter(
            run_id=OuterRef("run_id"),
            approval_interrupt_id=OuterRef("interrupt_id"),
            connector_resume__status=ConnectorResume.Status.DELIVERED,
        )
    )
