"""The client package stands alone: its core needs only the standard library and httpx, and
only its middleware module touches LangChain / LangGraph. Never Django or the console."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import approval_console_client

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(approval_console_client.__file__).resolve().parent
OURS = {"console", "agents", "approvals", "audit", "core", "examples", "tests"}

BLOCKED_IMPORT = """
import importlib.abc, sys
BLOCKED = {"django", "rest_framework", "langchain", "langchain_core", "langgraph",
           "console", "agents", "approvals", "audit", "core", "examples", "tests"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked: {name}")
sys.meta_path.insert(0, Block())
import approval_console_client as c
body = b'{"id": "r", "status": "decided", "resume": {"decisions": []}}'
headers = {"webhook-id": "m", "webhook-timestamp": "1000",
           "webhook-signature": c.webhooks.sign(body, msg_id="m", timestamp=1000,
                                                secret="whsec_c2VjcmV0")}
assert c.resume_value(c.verify_webhook(body, headers, secret="whsec_c2VjcmV0", now=1000)) == {
    "decisions": []}
print(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def test_the_client_imports_and_verifies_with_django_langchain_and_the_console_blocked():
    done = subprocess.run(
        [sys.executable, "-I", "-c", BLOCKED_IMPORT],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _top_level_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_middleware_module_imports_langchain_and_nothing_imports_the_console():
    allowed_core = set(sys.stdlib_module_names) | {"httpx", "approval_console_client"}
    for path in sorted(PACKAGE.glob("*.py")):
        imports = _top_level_imports(path)
        assert not imports & OURS, path.name
        if path.name == "middleware.py":
            assert imports - allowed_core <= {"langchain", "langchain_core", "langgraph"}
        else:
            assert imports <= allowed_core, (path.name, imports - allowed_core)


def test_the_package_declares_httpx_as_its_only_dependency_and_langchain_as_an_extra():
    with (ROOT / "clients" / "python" / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    assert project["name"] == "approval-console-client"
    assert project["version"] == approval_console_client.__version__ == "0.1.0"
    assert [d.split(">")[0].split("=")[0] for d in project["dependencies"]] == ["httpx"]
    assert project["optional-dependencies"]["langchain"] == [
        "langchain>=1.0,<2",
        "langgraph>=1.0,<2",
    ]


def test_the_example_agent_imports_nothing_of_the_console():
    for path in sorted((ROOT / "examples" / "remote_agent").glob("*.py")):
        imports = _top_level_imports(path)
        assert not imports & (OURS - {"examples"}), path.name
        assert "django" not in imports and "rest_framework" not in imports, path.name
