"""Run only the web server, in place of this process: the container's ``web`` service.

The same gunicorn command line as ``serve`` (one definition, ``web_command``), but exec'd, so
gunicorn itself receives the container's stop signal and its exit status is the command's.
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connections

from console.management.commands.serve import web_arguments_add, web_command


class Command(BaseCommand):
    help = "Run the web server (gunicorn) alone, replacing this process; `worker` runs the rest."

    def add_arguments(self, parser) -> None:
        web_arguments_add(parser)

    def handle(self, *args, host: str, port: int, workers: int, threads: int, **options) -> None:
        command = web_command(host=host, port=port, workers=workers, threads=threads)
        # Nothing of this process survives the exec but its open descriptors: close them.
        connections.close_all()
        self.stdout.write(f"Web server on http://{host}:{port}/ ({workers} x {threads} threads)")
        self.stdout.flush()
        os.chdir(settings.BASE_DIR)  # gunicorn imports console.wsgi from its working directory
        os.execv(command[0], command)
