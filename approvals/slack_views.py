"""Slack's interactivity endpoint: a button press of a Block Kit message, verified with the
endpoint's Slack signing secret (approvals/slack.py) before anything is read from it."""

from __future__ import annotations

import json
import time

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.request import RawPostDataException
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from approvals.models import WebhookEndpoint
from approvals.services.slack import slack_interaction_handle
from approvals.slack import MAX_BODY_BYTES, slack_request_verified


def _refuse(status: int, why: str) -> JsonResponse:
    return JsonResponse({"error": why}, status=status)


@csrf_exempt  # Slack signs the request instead (X-Slack-Signature)
@require_POST
def slack_interactions(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    endpoint = (
        WebhookEndpoint.objects.filter(
            pk=endpoint_id, kind=WebhookEndpoint.Kind.SLACK, is_active=True
        )
        .exclude(slack_signing_secret="")
        .first()
    )
    if endpoint is None:
        return _refuse(404, "no Slack endpoint here")
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return _refuse(400, "bad Content-Length")
    if length > MAX_BODY_BYTES:
        return _refuse(413, "request too large")
    try:
        body = request.body
    except (RawPostDataException, OSError):
        return _refuse(400, "unreadable body")
    if len(body) > MAX_BODY_BYTES:
        return _refuse(413, "request too large")
    verified = slack_request_verified(
        secret=endpoint.slack_signing_secret,
        timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
        signature=request.headers.get("X-Slack-Signature", ""),
        body=body,
        now=time.time(),
    )
    if not verified:
        return _refuse(401, "signature missing, wrong or stale")
    try:
        payload = json.loads(request.POST.get("payload", ""))
    except (ValueError, RecursionError):  # signed, yet nested too deeply to read
        return _refuse(400, "no interaction payload")
    return JsonResponse(
        slack_interaction_handle(endpoint=endpoint, payload=payload, request=request)
    )
