"""Run the periodic sweep once: approvals (remind, escalate, expire, notification retries),
stuck runs and queues, and the recovery of runs whose worker died."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.utils.module_loading import import_string

from approvals.services import approvals_sweep
from approvals.services.stuck import stuck_sweep

# By dotted name: approvals never imports agents (DESIGN.md).
RUNS_RECOVER = "agents.tasks.runs_recover"


class Command(BaseCommand):
    help = "Run the every-minute sweep once (approvals, then run recovery)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--approvals-only", action="store_true", help="Skip the recovery of runs."
        )

    def handle(self, *args, **options) -> None:
        counts = {**approvals_sweep(), **stuck_sweep()}
        self.stdout.write(
            "approvals: " + ", ".join(f"{name} {count}" for name, count in counts.items())
        )
        if not options["approvals_only"]:
            recovered = import_string(RUNS_RECOVER)()
            self.stdout.write(f"runs recovered: {recovered}")
