"""Writes of the remote approval service: open a request (and view it).

``remote_request_open`` turns an agent's interrupt value into approval requests of its run
(``protocol.approval_items``), the tier always from the console's policy. Closing decided
requests is ``agents/remote/closing.py``.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.hitl import protocol
from agents.remote.bodies import remote_request_body
from agents.remote.callbacks import callback_url_check
from agents.remote.errors import RemoteRequestConflict, RemoteRequestInvalid, RemoteToolForbidden
from agents.remote.models import ExternalAgent, RemoteRequest
from agents.tools import tool_find
from approvals import policy
from approvals import services as approval_services
from approvals.contract import is_console_payload
from approvals.models import AgentRun, ApprovalRequest
from audit.canonical import canonical_hash
from audit.services import event_record
from core.sealing import datakey_scope

GRAPH_VERSION = "external"
# What a console payload may not bring from outside: the console sets these itself.
_CALLER_KEYS = ("tier", "expires_at", "recheck")
_CONTEXT_KEYS = ("evidence", "rationale", "blast_radius")
_TOOL_MAX_LENGTH = ApprovalRequest._meta.get_field("tool").max_length
_ID_MAX_LENGTH = RemoteRequest._meta.get_field("thread_id").max_length


def run_thread_id(*, agent: ExternalAgent, thread_id: str) -> str:
    """The AgentRun's (globally unique, 64 characters) thread id of an agent's thread."""
    full = f"{agent.run_agent}:{thread_id}"
    if len(full) <= 64:
        return full
    return "external:#" + hashlib.sha256(full.encode()).hexdigest()[:54]


def approval_interrupt_id(interrupt_id: str) -> str:
    """The ApprovalRequest's interrupt id (64 characters): a longer one, or one starting with
    ``#`` (the hashed forms' mark), is hashed, so no id is ever another one's hashed form."""
    if len(interrupt_id) <= 64 and not interrupt_id.startswith("#"):
        return interrupt_id
    return "#" + hashlib.sha256(interrupt_id.encode()).hexdigest()[:63]


def remote_request_open(
    *,
    agent: ExternalAgent,
    thread_id: str,
    interrupt_id: str,
    value: Any,
    response_schema: Any = None,
    context: dict | None = None,
    callback_url: str = "",
    run_input: dict | None = None,
    request: Any = None,
) -> tuple[RemoteRequest, bool]:
    """Open the approval requests of one interrupt; (request, created).

    Idempotent: the same (agent, thread, interrupt) with the same value returns the existing
    request; with another value, RemoteRequestConflict (409). The thread's run is made on its
    first request (agent ``external:<name>``, requested by the agent's service user) and moves
    back to waiting with each later one."""
    for field, given in (("thread_id", thread_id), ("interrupt_id", interrupt_id)):
        if not 0 < len(given) <= _ID_MAX_LENGTH:  # the API checks too; the connector does not
            raise RemoteRequestInvalid(
                f"{field} has 1 to {_ID_MAX_LENGTH} characters.",
                errors={field: f"1 to {_ID_MAX_LENGTH} characters"},
            )
    value_hash = canonical_hash(value)
    url = callback_url_check(agent=agent, url=callback_url or "")
    for attempt in range(2):
        existing = RemoteRequest.objects.filter(
            agent=agent, thread_id=thread_id, interrupt_id=interrupt_id
        ).first()
        if existing is not None:
            if existing.value_hash != value_hash:
                raise RemoteRequestConflict(
                    "This thread_id and interrupt_id were already sent with another value.",
                    errors={"value": "differs from the value first sent for this interrupt"},
                )
            return existing, False
        try:
            return _open(
                agent=agent,
                thread_id=thread_id,
                interrupt_id=interrupt_id,
                value=value,
                value_hash=value_hash,
                response_schema=response_schema,
                context=context or {},
                callback_url=url,
                run_input=run_input or {},
                request=request,
            ), True
        except IntegrityError:
            if attempt:  # a concurrent first request won twice: not a race any more
                raise
    raise AssertionError("unreachable")


def _open(
    *,
    agent: ExternalAgent,
    thread_id: str,
    interrupt_id: str,
    value: Any,
    value_hash: str,
    response_schema: Any,
    context: dict[str, Any],
    callback_url: str,
    run_input: dict[str, Any],
    request: Any,
) -> RemoteRequest:
    inner_id = approval_interrupt_id(interrupt_id)
    with policy.policy_read_once():
        items = remote_items(
            agent=agent,
            interrupt_id=inner_id,
            value=value,
            response_schema=response_schema,
            context=context,
        )
    with datakey_scope(), transaction.atomic():
        run = AgentRun.objects.filter(thread_id=run_thread_id(agent=agent, thread_id=thread_id))
        run = run.first()
        if run is None:
            run = approval_services.run_create(
                agent=agent.run_agent,
                graph_version=GRAPH_VERSION,
                input=run_input,
                requested_by=agent.user,
                request=request,
                thread_id=run_thread_id(agent=agent, thread_id=thread_id),
                owner_group=agent.owner_group,
                enqueue=False,
            )
        elif run.requested_by_id != agent.user_id or run.agent != agent.run_agent:
            # A run of another agent (one that had this agent's name before a rename).
            raise RemoteRequestConflict(
                f"The thread {thread_id!r} belongs to a run of another agent.",
                errors={"thread_id": "its run belongs to another agent"},
            )
        elif run.erased_at is not None or run.is_terminal:
            raise RemoteRequestConflict(
                f"The run of thread {thread_id!r} is {run.status}: it takes no new request.",
                errors={"thread_id": f"its run is {run.status}"},
            )
        remote = RemoteRequest(
            agent=agent,
            run=run,
            thread_id=thread_id,
            interrupt_id=interrupt_id,
            approval_interrupt_id=inner_id,
            value=value,
            value_hash=value_hash,
            protocol=protocol.protocol_name(value),
            callback_url=callback_url,
        )
        remote.save(force_insert=True)
        try:
            approvals = approval_services.approval_requests_sync(
                run=run, requests=items, waiting=True
            )
        except approval_services.RunStopped as exc:
            raise RemoteRequestConflict(
                f"The run of thread {thread_id!r} was cancelled or finished.",
                errors={"thread_id": "its run takes no new request"},
            ) from exc
        if len(approvals) != len(items):
            # Approvals of this interrupt id exist already: another request's, never shared
            # (the sync reads them under the run's row lock; raising rolls this one back).
            raise RemoteRequestConflict(
                f"The interrupt {interrupt_id!r} names approvals of another request.",
                errors={"interrupt_id": "its approvals belong to another request"},
            )
        event_record(
            action="remote.requested",
            actor=agent.user,
            run_id=run.id,
            data={
                "request_id": str(remote.id),
                "thread_id": thread_id,
                "interrupt_id": interrupt_id,
                "protocol": remote.protocol,
                "value_hash": value_hash,
                "approvals": [a.id for a in approvals],
                "callback_url": callback_url,
            },
            request=request,
        )
    return remote


def remote_items(
    *,
    agent: ExternalAgent,
    interrupt_id: str,
    value: Any,
    response_schema: Any,
    context: dict[str, Any],
) -> list[dict[str, Any]]:
    """The approval items of an interrupt value, tier from the console's policy, context merged."""
    if is_console_payload(value):
        value = _console_value(value)
    question = protocol.protocol_name(value) == protocol.OTHER_PROTOCOL
    items = protocol.approval_items(
        interrupt_id=interrupt_id, value=copy.deepcopy(value), response_schema=response_schema
    )
    if not items:
        raise RemoteRequestInvalid(
            "The value asks about no action.", errors={"value": "names no action to decide"}
        )
    extra = {key: context[key] for key in _CONTEXT_KEYS if context.get(key) not in (None, "")}
    for item in items:
        tool = item["tool"]
        if not 0 < len(tool) <= _TOOL_MAX_LENGTH:
            raise RemoteRequestInvalid(
                f"A tool name has 1 to {_TOOL_MAX_LENGTH} characters.",
                errors={"value": f"a tool name longer than {_TOOL_MAX_LENGTH} characters"},
            )
        # Only an unrecognised payload is a question without a tool; any other naming the
        # console's "(agent question)" still needs it in the agent's tools.
        if not (question and tool == protocol.UNKNOWN_TOOL) and not agent.tool_allowed(tool):
            raise RemoteToolForbidden(
                f"Agent {agent.name!r} may not ask about tool {tool!r}.",
                errors={"value": f"tool {tool!r} is not one of the agent's tools"},
            )
        payload = dict(item["payload"]) if isinstance(item["payload"], dict) else {}
        payload.update(extra)
        item["payload"] = payload
        _tier_from_policy(item)
    return items


def _console_value(value: dict[str, Any]) -> dict[str, Any]:
    """A console payload without what only the console sets (tier, expiry, recheck), its
    ``allowed_decisions`` (optional) a non-empty list of known decisions, else 400."""
    value = {k: v for k, v in value.items() if k not in _CALLER_KEYS}
    claimed = value.get("allowed_decisions")
    if claimed is None:
        return value
    if not (
        isinstance(claimed, list)
        and claimed
        and all(isinstance(d, str) and d in policy.ALL_DECISIONS for d in claimed)
    ):
        known = ", ".join(policy.ALL_DECISIONS)
        raise RemoteRequestInvalid(
            f"allowed_decisions is a non-empty list of {known}.",
            errors={"value": f"allowed_decisions must be a non-empty list of {known}"},
        )
    value["allowed_decisions"] = [d for d in policy.ALL_DECISIONS if d in claimed]
    return value


def _tier_from_policy(item: dict[str, Any]) -> None:
    """The item's tier as the console's policy has it for this tool and args (never the
    caller's), with that tier's expiry (never the payload's) and the decisions both the
    caller and the tier allow (the tier's own when none is in both)."""
    tool = item["tool"]
    if tool == protocol.UNKNOWN_TOOL:
        tier = protocol.HITL_DEFAULT_TIER
    else:
        spec = tool_find(tool)
        default = spec.tier if spec else protocol.HITL_DEFAULT_TIER
        tier = policy.tier_for_call(tool=tool, args=item["args"], default_tier=default)
    payload = item["payload"]
    expires_at = timezone.now() + dt.timedelta(seconds=policy.tier_ttl_seconds(tier))
    item["expires_at"] = expires_at
    if is_console_payload(payload) or "expires_at" in payload:
        payload["expires_at"] = expires_at.isoformat()
    item["tier"] = tier
    if "tier" in payload or is_console_payload(payload):
        payload["tier"] = tier
    by_tier = policy.tier_allowed_decisions(tier)
    allowed = [d for d in by_tier if d in item["allowed_decisions"]] or by_tier
    item["allowed_decisions"] = allowed
    if is_console_payload(payload) or "allowed_decisions" in payload:
        payload["allowed_decisions"] = allowed


def remote_request_view(
    *, remote: RemoteRequest, approvals: list[ApprovalRequest] | None = None
) -> dict[str, Any]:
    """The request as the agent reads it (GET body; the callback adds its ``type``)."""
    return remote_request_body(remote=remote, approvals=approvals)
