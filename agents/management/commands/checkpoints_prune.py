"""Run checkpoint retention passes now (the same pass the every-minute schedule runs)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.runtime.retention import checkpoints_prune, retention_candidates


class Command(BaseCommand):
    help = (
        "Prune the checkpoints of finished runs past their retention policy, in bounded "
        "passes; never a queued, waiting or running run. Audited as checkpoints.pruned."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch",
            type=int,
            default=settings.CHECKPOINT_PRUNE_BATCH,
            help="runs per pass (default CHECKPOINT_PRUNE_BATCH)",
        )
        parser.add_argument(
            "--until-done", action="store_true", help="run passes until no run is due"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count the runs due in one pass, prune nothing"
        )

    def handle(self, *args: Any, batch: int, until_done: bool, dry_run: bool, **opts: Any) -> None:
        if batch < 1:
            raise CommandError("--batch must be a positive number")
        if dry_run:
            due = retention_candidates(limit=batch)
            self.stdout.write(f"{len(due)} run(s) due in the next pass (batch {batch}).")
            return
        passes = 0
        while True:
            candidates = retention_candidates(limit=batch)
            result = checkpoints_prune(candidates)
            passes += 1
            summary = ", ".join(f"{key} {value}" for key, value in result.summary().items())
            self.stdout.write(f"pass {passes}: {summary}")
            # A pass that moved nothing (all deferred) would select the same runs again.
            if not until_done or len(candidates) < batch or not (result.runs or result.kept):
                break
        self.stdout.write(self.style.SUCCESS(f"Done: {passes} pass(es)."))
