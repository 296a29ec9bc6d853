"""The Dockerfile, .dockerignore and the entry point, read as what they instruct.

This machine cannot build the image (no container daemon), so these checks read the files;
tests/deploy/test_entrypoint.py runs the entry point's commands for real.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import PurePosixPath

import pytest

from tests.deploy.files import (
    ROOT,
    Instruction,
    dockerfile_env,
    dockerfile_read,
    dockerignore_rules,
    dockerignored,
    entrypoint_commands,
    shell_commands,
)

sys.path.insert(0, str(ROOT / "bin"))
import requirements  # noqa: E402  (bin/requirements.py, a script)

INSTRUCTIONS = dockerfile_read()
ENV = dockerfile_env(INSTRUCTIONS)
COMMANDS = entrypoint_commands()


def instructions(keyword: str) -> list[Instruction]:
    return [i for i in INSTRUCTIONS if i.keyword == keyword]


def only(keyword: str) -> Instruction:
    [found] = instructions(keyword)
    return found


def run_commands() -> list[tuple[Instruction, list[str]]]:
    return [(i, words) for i in instructions("RUN") for words in shell_commands(i.text)]


def workdir_path(relative: str) -> str:
    return str(PurePosixPath(only("WORKDIR").text) / relative)


def test_image_starts_from_python_311_slim():
    assert only("FROM").text == "python:3.11-slim"


def test_image_runs_as_a_user_it_creates_and_not_as_root():
    user = only("USER")
    assert user.text.split(":")[0] not in ("root", "0")
    created = [words for _, words in run_commands() if words[0] == "useradd"]
    assert [words[-1] for words in created] == [user.text]
    # Nothing is run or started as root after the switch but the entry point, as that user.
    after = [i.keyword for i in INSTRUCTIONS if i.line > user.line]
    assert "RUN" not in after
    assert user.line < only("ENTRYPOINT").line


def test_image_installs_the_runtime_dependencies_of_pyproject_and_not_the_dev_ones():
    [(install, generate)] = [
        (i, words) for i, words in run_commands() if words[:2] == ["python", "bin/requirements.py"]
    ]
    assert generate[2:4] == [">", "/tmp/requirements.txt"]  # no --dev
    pip = [words for i, words in run_commands() if i is install and words[:2] == ["pip", "install"]]
    assert [words[words.index("-r") + 1] for words in pip] == ["/tmp/requirements.txt"]
    with (ROOT / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    runtime = requirements.requirements(dev=False)
    assert runtime == project["dependencies"]
    assert not set(project["optional-dependencies"]["dev"]) & set(runtime)
    # The Makefile's venv reads the same script, with the dev extra.
    makefile = [line.strip() for line in (ROOT / "Makefile").read_text().splitlines()]
    assert "$(PY) bin/requirements.py --dev > $(VENV)/requirements.txt" in makefile


def test_static_files_are_collected_at_build_into_the_image_outside_the_var_volume():
    copy_all = next(i for i in instructions("COPY") if i.words() == [".", "."])
    [collect] = [i for i, words in run_commands() if words == ["bin/console", "static"]]
    assert copy_all.line < collect.line < only("USER").line
    assert "manage.py collectstatic --noinput" in COMMANDS["static"]
    volumes = only("VOLUME").exec_form()
    assert volumes == [ENV["CONSOLE_VAR_DIR"]] == [workdir_path("var")]
    static_root = PurePosixPath(ENV["CONSOLE_STATIC_ROOT"])
    assert static_root.is_absolute()
    assert not static_root.is_relative_to(ENV["CONSOLE_VAR_DIR"])


def test_the_var_volume_is_the_one_folder_the_user_may_write():
    chown = [words for _, words in run_commands() if words[0] == "chown"]
    assert chown == [["chown", f"{only('USER').text}:{only('USER').text}", ENV["CONSOLE_VAR_DIR"]]]


def test_image_enters_through_bin_console_and_serves_the_web_on_every_address():
    assert only("ENTRYPOINT").exec_form() == [workdir_path("bin/console")]
    command = only("CMD").exec_form()
    assert command[0] in COMMANDS
    assert command[command.index("--host") + 1] == "0.0.0.0"


def test_image_health_check_asks_healthz_through_the_entry_point_on_the_exposed_port():
    options, _, form = only("HEALTHCHECK").text.partition("CMD")
    assert "--interval=" in options and "--timeout=" in options
    check = Instruction("CMD", form.strip(), 0).exec_form()
    assert check == [workdir_path("bin/console"), "healthcheck", "/healthz"]
    assert COMMANDS["healthcheck"].endswith('-m console.healthcheck "$@"')
    assert only("EXPOSE").text == ENV["PORT"]


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".git/config",
        ".venv/bin/python",
        "var/console.sqlite3",
        "var/staticfiles/css/app.css",
        "console/__pycache__/x.pyc",
        "agents/x.sqlite3",
        "tests/conftest.py",
    ],
)
def test_build_context_leaves_out_secrets_local_state_and_tests(path):
    assert dockerignored(path, dockerignore_rules())


def test_build_context_keeps_every_tracked_file_the_image_runs():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    needed = [
        path
        for path in tracked
        if path.split("/")[0]
        in {
            "agents",
            "approvals",
            "audit",
            "console",
            "core",
            "examples",
            "static",
            "templates",
            "bin",
            "manage.py",
            "pyproject.toml",
        }
    ]
    assert len(needed) > 100
    rules = dockerignore_rules()
    assert [path for path in needed if dockerignored(path, rules)] == []


def test_entry_point_help_lists_every_command_and_an_unknown_one_fails_with_usage():
    shown = subprocess.run(
        [str(ROOT / "bin" / "console"), "help"], capture_output=True, text=True, check=True
    ).stdout
    listed = {line.split()[1] for line in shown.splitlines() if line.strip()}
    assert listed == set(COMMANDS) - {"help"}
    unknown = subprocess.run([str(ROOT / "bin" / "console"), "deploy"], capture_output=True)
    assert unknown.returncode == 64
    assert b"unknown command 'deploy'" in unknown.stderr


def test_entry_point_is_posix_sh():
    assert (ROOT / "bin" / "console").read_text().startswith("#!/bin/sh\n")
    subprocess.run(["sh", "-n", str(ROOT / "bin" / "console")], check=True)
