from django.apps import AppConfig
from django.db import DEFAULT_DB_ALIAS
from django.db.models.signals import post_migrate


def _run_status_triggers(sender, using=DEFAULT_DB_ALIAS, **kwargs) -> None:
    from approvals.rollup_pending import pending_triggers_ensure
    from approvals.rollup_runs import run_status_triggers_ensure

    if using == DEFAULT_DB_ALIAS:  # the counts and their rebuild live on the default database
        run_status_triggers_ensure()
        pending_triggers_ensure()


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # A migration that remakes the runs or approvals table on SQLite drops its triggers.
        post_migrate.connect(_run_status_triggers, sender=self)
