from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Shared building blocks; its one model is the per-run data key (core/sealing.py)."""

    name = "core"
    default_auto_field = "django.db.models.BigAutoField"
