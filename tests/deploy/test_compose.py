"""compose.yaml and its env file, parsed: the services, their commands and order, and that
every variable handed to the console is one the console reads."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import yaml
from django.conf import settings

from tests.deploy.files import (
    ROOT,
    entrypoint_commands,
    env_file_read,
    environment_variables_read,
    readme_configuration_variables,
)

COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
ENV_EXAMPLE = env_file_read(ROOT / "compose.env.example")
COMMANDS = entrypoint_commands()
IMAGE = SERVICES["web"]["image"]
# What the compose file wires by name: Postgres's own variables, read by its image.
POSTGRES_ONLY = {"POSTGRES_PASSWORD"}


def console_services() -> dict[str, Any]:
    return {name: s for name, s in SERVICES.items() if s.get("image") == IMAGE}


def test_compose_runs_postgres_redis_a_one_shot_migrate_web_and_worker():
    assert {"postgres", "redis", "migrate", "web", "worker"} <= set(SERVICES)
    assert set(console_services()) >= {"migrate", "web", "worker"}
    assert SERVICES["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert SERVICES["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert SERVICES["migrate"]["restart"] == "no"


def test_every_console_service_builds_the_image_and_runs_an_entry_point_command():
    for name, service in console_services().items():
        assert service["build"] == ".", name
        assert "entrypoint" not in service, f"{name} must keep the image's entry point"
        assert service["command"][0] in COMMANDS, name
        assert service["env_file"] == [".env"], name
        assert service["volumes"] == ["console-var:/app/var"], name
    assert [SERVICES[name]["command"][0] for name in ("migrate", "web", "worker")] == [
        "migrate",
        "web",
        "worker",
    ]
    web = SERVICES["web"]["command"]
    assert web[web.index("--host") + 1] == "0.0.0.0"
    # The port comes from PORT, which the health check reads too: no second source.
    assert "--port" not in web


def test_only_the_web_service_keeps_the_images_http_health_check():
    for name in console_services():
        disabled = SERVICES[name].get("healthcheck", {}).get("disable", False)
        assert disabled is (name != "web"), name


def test_web_and_worker_start_after_migrate_succeeded_and_migrate_after_postgres_is_healthy():
    assert SERVICES["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("web", "worker"):
        depends = SERVICES[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_a_stopped_worker_has_time_to_finish_its_task_before_it_is_killed():
    grace = SERVICES["worker"]["stop_grace_period"]
    assert re.fullmatch(r"\d+s", grace)
    assert int(grace[:-1]) > settings.Q_TIMEOUT


def test_the_demo_people_are_seeded_only_on_request():
    assert SERVICES["demo"]["command"] == ["demo"]
    assert SERVICES["demo"]["profiles"] == ["demo"]


def test_env_file_wires_the_compose_network_with_the_redis_broker():
    assert {
        "DATABASE_URL",
        "REDIS_URL",
        "Q_BROKER",
        "SECRET_KEY",
        "ENCRYPTION_KEYS",
        "ALLOWED_HOSTS",
        "CSRF_TRUSTED_ORIGINS",
    } <= set(ENV_EXAMPLE)
    assert ENV_EXAMPLE["Q_BROKER"] == "redis"
    assert ENV_EXAMPLE["DJANGO_REQUIRE_SECRET_KEY"] == "true"
    assert urlsplit(ENV_EXAMPLE["REDIS_URL"]).hostname == "redis"
    database = urlsplit(ENV_EXAMPLE["DATABASE_URL"])
    postgres = SERVICES["postgres"]["environment"]
    assert (database.hostname, database.port) == ("postgres", 5432)
    assert database.username == postgres["POSTGRES_USER"]
    assert database.path == f"/{postgres['POSTGRES_DB']}"
    # One password, from the env file, for the server and for the URL.
    assert re.fullmatch(r"\$\{POSTGRES_PASSWORD:\?.+\}", postgres["POSTGRES_PASSWORD"])
    example = (ROOT / "compose.env.example").read_text()
    assert "@postgres:5432" in ENV_EXAMPLE["DATABASE_URL"]
    assert "console:${POSTGRES_PASSWORD}@postgres" in example


def test_env_file_names_only_variables_the_console_reads_and_the_readme_documents():
    read = environment_variables_read(("console", "agents", "approvals", "audit", "core"))
    documented = readme_configuration_variables()
    handed = set(ENV_EXAMPLE) - POSTGRES_ONLY
    assert sorted(handed - read) == []
    assert sorted(handed - documented) == []


def test_env_file_with_its_secrets_filled_in_configures_the_console_for_compose():
    key = base64.b64encode(os.urandom(32)).decode()
    filled = {
        **ENV_EXAMPLE,
        "POSTGRES_PASSWORD": "pw",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ENCRYPTION_KEYS": f"k1:{key}",
    }
    filled["DATABASE_URL"] = filled["DATABASE_URL"].replace("console:@", "console:pw@")
    env = {"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "console.settings", **filled}
    script = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "db = s.DATABASES['default']; "
        "print(json.dumps([db['ENGINE'], db['HOST'], db['PASSWORD'], s.Q_CLUSTER.get('redis'), "
        "s.CACHES['default']['BACKEND'], s.ALLOWED_HOSTS, s.CSRF_TRUSTED_ORIGINS, "
        "s.SECRET_KEY == s.DEVELOPMENT_SECRET_KEY]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        "django.db.backends.postgresql",
        "postgres",
        "pw",
        "redis://redis:6379/0",
        "django.core.cache.backends.redis.RedisCache",
        ["localhost", "127.0.0.1"],
        ["http://localhost:8000", "http://127.0.0.1:8000"],
        False,
    ]


def test_env_file_left_without_a_secret_key_stops_the_console():
    env = {"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "console.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**env, **ENV_EXAMPLE},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr
