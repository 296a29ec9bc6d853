"""An external agent says its thread is over: the run completes (or fails) in the console.

Until then an external run shows as running between its requests (the agent runs in its own
service); the end comes from the agent, never from a guess. A finished thread takes no new
request (409), as a finished in-process run takes no resume.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.remote.errors import RemoteRequestConflict, RemoteThreadNotFound
from agents.remote.models import ExternalAgent, RemoteRequest
from agents.remote.services import run_thread_id
from approvals.models import AgentRun
from approvals.services.runs import run_move
from audit.services import event_record

FINISHED = {"completed": AgentRun.Status.COMPLETED, "failed": AgentRun.Status.FAILED}


def remote_thread_finish(
    *,
    agent: ExternalAgent,
    thread_id: str,
    status: str,
    output: dict[str, Any] | None = None,
    error: str = "",
    request: Any = None,
) -> tuple[AgentRun, bool]:
    """Move the run of the agent's thread to completed or failed; (run, moved).

    The same status again is an idempotent retry (moved False); another end, a cancelled run,
    or a request still pending is a conflict (409): decide or cancel it first."""
    target = FINISHED[status]
    run = AgentRun.objects.filter(
        thread_id=run_thread_id(agent=agent, thread_id=thread_id), requested_by_id=agent.user_id
    ).first()
    if run is None:
        raise RemoteThreadNotFound(
            f"No run of thread {thread_id!r}: it never sent a request.",
            errors={"thread_id": "no request was ever sent for this thread"},
        )
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if locked.status == target:
            return locked, False
        if locked.is_terminal or locked.cancel_requested:
            raise RemoteRequestConflict(
                f"The run of thread {thread_id!r} is {locked.status}.",
                errors={"status": f"the run is already {locked.status}"},
            )
        pending = RemoteRequest.objects.filter(run=locked, status=RemoteRequest.Status.PENDING)
        if pending.exists():
            raise RemoteRequestConflict(
                f"Thread {thread_id!r} still waits on {pending.count()} approval request(s).",
                errors={"thread_id": "a request of this thread is still pending"},
            )
        fields: dict[str, Any] = {"lease_owner": "", "lease_expires_at": None}
        private: dict[str, Any] = {}
        if target == AgentRun.Status.COMPLETED:
            fields["output"] = private["output"] = output or {}
        else:
            fields["error"] = private["error"] = error
        moved = run_move(run=locked, status=target, **fields)
        event_record(
            action=f"run.{target}",
            actor=agent.user,
            run_id=locked.pk,
            data={"reported_by": "agent", "thread_id": thread_id},
            private=private,
            request=request,
        )
    return moved, True
