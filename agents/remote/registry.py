"""Writes for external agents (the admin calls these): register or change one (its service
user and its callback endpoint kept in step), issue and revoke keys. Each audited as
``external_agent.changed``, never with a secret."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from agents.remote import credentials
from agents.remote.models import ExternalAgent, ExternalAgentKey
from approvals.models import AgentRun, WebhookEndpoint
from audit.services import event_record


def external_agent_save(
    *, agent: ExternalAgent, actor: Any, change: str = "", request: Any = None
) -> ExternalAgent:
    """Create or update ``agent``: its service user (``external:<name>``, no password, no
    groups, not staff) and the endpoint that signs its callbacks follow it."""
    with transaction.atomic():
        created = agent.pk is None
        if agent.user_id is None:
            agent.user = _service_user(agent.run_agent)
        elif agent.user.username != agent.run_agent:  # renamed
            agent.user.username = agent.run_agent
            agent.user.save(update_fields=["username"])
        agent.save()
        _endpoint_sync(agent)
        # Its runs' watchers follow the agent's owner group (the runs made before too).
        AgentRun.objects.filter(requested_by_id=agent.user_id).exclude(
            owner_group_id=agent.owner_group_id
        ).update(owner_group_id=agent.owner_group_id)
        _record(
            agent,
            change=change or ("created" if created else "changed"),
            actor=actor,
            request=request,
        )
    return agent


def _service_user(username: str) -> Any:
    user = get_user_model()(username=username, is_active=True, is_staff=False)
    user.set_unusable_password()
    user.save()
    return user


def _endpoint_sync(agent: ExternalAgent) -> None:
    """The agent's callback endpoint: its URL, secret and active state follow the agent's."""
    endpoint = agent.endpoint
    if endpoint is None:
        if not agent.callback_url:
            return
        endpoint = WebhookEndpoint(name=agent.run_agent, kind=WebhookEndpoint.Kind.STANDARD)
    endpoint.name = agent.run_agent
    endpoint.url = agent.callback_url
    endpoint.secret = agent.callback_secret
    endpoint.is_active = agent.is_active and bool(agent.callback_url)
    endpoint.save()
    if agent.endpoint_id != endpoint.pk:
        agent.endpoint = endpoint
        agent.save(update_fields=["endpoint"])


def external_agent_secret_rotate(*, agent: ExternalAgent, actor: Any, request: Any = None) -> str:
    """A new callback secret (pending callbacks are signed with it from their next attempt)."""
    from approvals.models import webhook_secret_new

    agent.callback_secret = webhook_secret_new()
    external_agent_save(agent=agent, actor=actor, change="callback secret rotated", request=request)
    return agent.callback_secret


def external_agent_key_issue(
    *, agent: ExternalAgent, actor: Any, request: Any = None
) -> tuple[ExternalAgentKey, str]:
    """A new key: (its row, the key itself, shown once and never stored)."""
    key = credentials.key_make()
    with transaction.atomic():
        row = ExternalAgentKey.objects.create(
            agent=agent, prefix=credentials.key_prefix(key), key_hash=credentials.key_hash(key)
        )
        _record(agent, change=f"key {row.prefix} issued", actor=actor, request=request)
    return row, key


def external_agent_key_revoke(*, key: ExternalAgentKey, actor: Any, request: Any = None) -> bool:
    """Revoke a key (401 from its next use); False if it was revoked already."""
    with transaction.atomic():
        moved = ExternalAgentKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if moved:
            _record(key.agent, change=f"key {key.prefix} revoked", actor=actor, request=request)
    return bool(moved)


def external_agent_authenticate(key: str) -> tuple[ExternalAgent, ExternalAgentKey] | None:
    """The active agent of a live key, or None; notes the key's last use (once a minute)."""
    if not credentials.key_looks_valid(key):
        return None
    row = (
        ExternalAgentKey.objects.select_related("agent", "agent__user")
        .filter(key_hash=credentials.key_hash(key), revoked_at__isnull=True)
        .first()
    )
    if row is None or not row.agent.is_active or not row.agent.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() >= 60:
        ExternalAgentKey.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return row.agent, row


def _record(agent: ExternalAgent, *, change: str, actor: Any, request: Any) -> None:
    event_record(
        action="external_agent.changed",
        actor=actor,
        data={
            "change": change,
            "state": {
                "name": agent.name,
                "owner_group": agent.owner_group.name if agent.owner_group_id else None,
                "tools": list(agent.tools or []),
                "callback_url": agent.callback_url,
                "is_active": agent.is_active,
            },
        },
        request=request,
    )
