"""A client for the approval console: ask people before an agent's risky actions.

``ConsoleClient`` needs only httpx. ``RemoteGateMiddleware`` (LangChain's ``create_agent``)
lives in ``approval_console_client.middleware`` and needs the ``langchain`` extra.
"""

from __future__ import annotations

from .client import ConsoleClient
from .context import current_idempotency_key, idempotency_key_set
from .errors import (
    BadRequest,
    Conflict,
    ConsoleError,
    ConsoleUnavailable,
    Forbidden,
    NotDecided,
    NotFound,
    ServerError,
    Unauthorized,
    WebhookVerificationError,
)
from .models import Approval, RemoteRequest, resume_value
from .webhooks import verify_webhook

__version__ = "0.1.0"

__all__ = [
    "Approval",
    "BadRequest",
    "Conflict",
    "ConsoleClient",
    "ConsoleError",
    "ConsoleUnavailable",
    "Forbidden",
    "NotDecided",
    "NotFound",
    "RemoteRequest",
    "ServerError",
    "Unauthorized",
    "WebhookVerificationError",
    "current_idempotency_key",
    "idempotency_key_set",
    "resume_value",
    "verify_webhook",
]
