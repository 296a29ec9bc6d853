"""Deciding from a Slack button (the request was verified by the view: approvals/slack.py).

Slack ignores the HTTP answer to a button press (``block_actions``): the answer is POSTed to the
payload's ``response_url`` by a task, after the decision committed, and only to URLs under
SLACK_RESPONSE_URL_PREFIXES. The same JSON is also the HTTP answer (harmless, and what a test
or a proxy sees).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from approvals.models import ApprovalRequest, SlackIdentity, WebhookEndpoint
from approvals.notification_webhooks import NO_REDIRECT_OPENER
from approvals.services.decisions import approval_decide
from approvals.services.errors import ChangesNotAcknowledged
from approvals.slack import BUTTONS, slack_action_read
from core.errors import ApplicationError

RESPOND_TASK = "approvals.tasks.slack_respond"
RESPOND_TIMEOUT_SECONDS = 10
VERBS = {"approved": "Approved", "edited": "Approved (edited)", "rejected": "Rejected"}


def _refusal(why: str) -> dict[str, Any]:
    """An ephemeral message to the person who pressed: only they see it; the message stays."""
    return {"response_type": "ephemeral", "replace_original": False, "text": why}


def slack_response_url_allowed(url: Any) -> bool:
    """Under one of the prefixes, and on the prefix's own host: a prefix configured without its
    slash ("https://hooks.slack.com") must not let https://hooks.slack.com.evil/ or
    https://hooks.slack.com@evil/ through."""
    if not isinstance(url, str):
        return False
    try:
        target = urlsplit(url)
        prefixes = [(p, urlsplit(p)) for p in settings.SLACK_RESPONSE_URL_PREFIXES if p]
    except ValueError:
        return False
    where = (target.scheme, target.netloc.lower())
    return any(
        url.startswith(prefix) and where == (allowed.scheme, allowed.netloc.lower())
        for prefix, allowed in prefixes
        if allowed.netloc
    )


def _respond_later(response_url: Any, answer: dict[str, Any]) -> None:
    if slack_response_url_allowed(response_url):
        transaction.on_commit(
            lambda: async_task(RESPOND_TASK, response_url, answer, group="notifications")
        )


def slack_interaction_handle(
    *, endpoint: WebhookEndpoint, payload: Any, request: Any = None
) -> dict[str, Any]:
    """Handle one verified interaction payload; returns the answer (also sent to response_url)."""
    if not isinstance(payload, dict):
        return _refusal("This request is not a button press the console knows.")
    with transaction.atomic():
        answer = _answer(endpoint=endpoint, payload=payload, request=request)
        if answer:
            _respond_later(payload.get("response_url"), answer)
    return answer


def _answer(*, endpoint: WebhookEndpoint, payload: dict[str, Any], request: Any) -> dict[str, Any]:
    actions = payload.get("actions")
    if payload.get("type") != "block_actions" or not isinstance(actions, list) or not actions:
        return _refusal("This request is not a button press the console knows.")
    action = actions[0] if isinstance(actions[0], dict) else {}
    if action.get("action_id") == "open":
        return {}  # a URL button: Slack opened the page; nothing to answer
    try:
        approval_id, payload_hash, decision = slack_action_read(
            endpoint_id=endpoint.pk, value=action.get("value")
        )
    except signing.BadSignature:
        return _refusal("This button is not valid: nothing was decided.")
    if decision not in BUTTONS or action.get("action_id") != decision:
        return _refusal("This button is not valid: nothing was decided.")
    user_info = payload.get("user") if isinstance(payload.get("user"), dict) else {}
    team = payload.get("team") if isinstance(payload.get("team"), dict) else {}
    team_id = str(team.get("id") or user_info.get("team_id") or "")
    identity = (
        SlackIdentity.objects.select_related("user")
        .filter(team_id=team_id, slack_user_id=str(user_info.get("id") or ""))
        .first()
    )
    if identity is None:
        return _refusal(
            "Your Slack account is not linked to a console user, so you cannot decide from "
            "Slack. Ask an administrator to map it (Slack identities, in the admin)."
        )
    approval = ApprovalRequest.objects.select_related("run").filter(pk=approval_id).first()
    if approval is None:
        return _refusal("This approval no longer exists: nothing was decided.")
    if approval.is_pending and approval.payload_hash != payload_hash:
        return _refusal(
            "The action changed since this message was sent: review it again in the console."
        )
    try:
        decided = approval_decide(
            approval=approval,
            user=identity.user,
            decision=decision,
            seen_hash=payload_hash,
            request=request,
            via="slack",
        )
    except ChangesNotAcknowledged as exc:
        # Slack cannot show the changes to confirm: the console's page does.
        changed = "; ".join(change.summary for change in exc.changes)
        return _refusal(
            f"Nothing was decided: what this action rests on changed while it waited ({changed})."
            " Open it in the console to review the changes and decide there."
        )
    except ApplicationError as exc:
        return _refusal(f"Nothing was decided: {exc.message}")
    who = identity.user.get_username()
    if decided.is_pending:  # a vote toward a quorum of several people
        return _refusal(f"Your approval counts, {who}: more reviewers must approve it.")
    when = timezone.localtime(decided.decided_at or timezone.now()).strftime("%H:%M")
    verb = VERBS.get(decided.status, decided.status.capitalize())
    text = f"{verb} by {who} at {when}: {decided.tool} (approval #{decided.pk})."
    return {
        "replace_original": True,
        "text": text,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }


def slack_respond(*, response_url: str, answer: dict[str, Any]) -> str:
    """POST the answer to Slack's response_url (the task; the prefix rule is checked again)."""
    if not slack_response_url_allowed(response_url):
        return "refused: not a Slack response URL"
    request = urllib.request.Request(
        response_url,
        data=json.dumps(answer).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "approval-console"},
        method="POST",
    )
    # No redirects followed: the POST goes where the prefix rule allowed, or nowhere.
    with NO_REDIRECT_OPENER.open(request, timeout=RESPOND_TIMEOUT_SECONDS) as response:
        return f"sent: {response.status}"
