"""The agent scheme: ``Authorization: Agent agk_...`` authenticates an external agent, and only
on ``/api/approval-requests/`` (those views list it; nowhere else does, so a key sent to any
other endpoint is no credential there: 401). ``request.user`` is the agent's service user and
``request.auth`` the ExternalAgent."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from agents.remote.models import ExternalAgent
from agents.remote.registry import external_agent_authenticate

KEYWORD = "Agent"


class AgentKeyAuthentication(BaseAuthentication):
    """An external agent's key (agents/remote/credentials.py); inactive agent or revoked key:
    401."""

    def authenticate(self, request: Any) -> tuple[Any, ExternalAgent] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid agent key header.")
        try:
            key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid agent key.") from None
        found = external_agent_authenticate(key)
        if found is None:
            raise exceptions.AuthenticationFailed("Invalid, revoked or inactive agent key.")
        agent, _key = found
        return agent.user, agent

    def authenticate_header(self, request: Any) -> str:
        return f'{KEYWORD} realm="api"'


class IsExternalAgent(BasePermission):
    """Only an agent's key: a person (token or session) is refused (403)."""

    message = "This endpoint is for agent credentials (Authorization: Agent <key>), not a person's."

    def has_permission(self, request: Any, view: Any) -> bool:
        if isinstance(request.auth, ExternalAgent):
            return True
        if request.user and request.user.is_authenticated:
            raise exceptions.PermissionDenied(self.message)
        return False  # not authenticated: 401 with the agent scheme's challenge


class AgentKeyScheme(OpenApiAuthenticationExtension):
    """The schema's name for the agent scheme."""

    target_class = AgentKeyAuthentication
    name = "agentKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'An external agent\'s key (issued in the admin), sent as "Agent <key>";'
            " valid only on /api/approval-requests/.",
        }
