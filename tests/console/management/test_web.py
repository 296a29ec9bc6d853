"""manage.py web (bin/console web): serve's web server alone, exec'd in place of the command."""

from __future__ import annotations

from io import StringIO

from django.conf import settings
from django.core.management import call_command

from console.management.commands import serve, web


def test_web_execs_the_same_gunicorn_command_line_as_serve(monkeypatch):
    calls: list[tuple[str, list[str], str]] = []
    monkeypatch.setattr(web.os, "chdir", lambda path: calls.append(("chdir", [], str(path))))
    monkeypatch.setattr(web.os, "execv", lambda path, argv: calls.append((path, argv, "")))
    out = StringIO()

    call_command("web", host="0.0.0.0", port=8123, workers=3, threads=2, stdout=out)

    expected = serve.web_command(host="0.0.0.0", port=8123, workers=3, threads=2)
    assert calls == [("chdir", [], str(settings.BASE_DIR)), (expected[0], expected, "")]
    assert "http://0.0.0.0:8123/" in out.getvalue()


def test_web_takes_the_same_options_and_defaults_as_serve(monkeypatch):
    argv: list[list[str]] = []
    monkeypatch.setattr(web.os, "chdir", lambda path: None)
    monkeypatch.setattr(web.os, "execv", lambda path, args: argv.append(args))
    monkeypatch.setenv("PORT", "8000")

    call_command("web", stdout=StringIO())

    assert argv == [serve.web_command(host="127.0.0.1", port=8000, workers=2, threads=4)]
