"""The console's own rows: API tokens (django-rest-knox's model, with a name per device)."""

from __future__ import annotations

from django.db import models
from knox.models import AbstractAuthToken


class ApiToken(AbstractAuthToken):
    """One API token of one person on one device: knox keeps only its digest (SHA-512) and
    its first characters (``token_key``, shown to tell tokens apart); the secret is answered
    once, at creation."""

    name = models.CharField(max_length=64, blank=True, help_text="The device or client.")
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.user} · {self.name or 'unnamed'} · {self.token_key}…"
