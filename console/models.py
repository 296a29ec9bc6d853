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


class WorkerHeartbeat(models.Model):
    """The last time a worker on a host ran the every-minute heartbeat task (``/readyz``).

    Written by a django-q2 task, so a fresh row proves the whole path works: the scheduler
    queued it, the broker delivered it and a worker ran it against the database."""

    host = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField(default=0)
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["-seen_at"]

    def __str__(self) -> str:
        return f"{self.host} (pid {self.pid}) at {self.seen_at:%Y-%m-%d %H:%M:%S}"
