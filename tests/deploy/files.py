"""Readers for the deployment files, so tests check what they say rather than grep for words:
the Dockerfile's instructions, .dockerignore's rules, the env file's variables, the entry
point's commands, and the environment variables the code reads."""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
ENV_READERS = {"env_str", "env_bool", "env_int", "env_float", "env_list", "env_choice", "_rate"}


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    text: str  # the arguments, continuation lines joined
    line: int

    def exec_form(self) -> list[str]:
        """The JSON array form (ENTRYPOINT ["a", "b"]); anything else is an error."""
        value = json.loads(self.text)
        assert isinstance(value, list), f"line {self.line}: {self.keyword} is not in exec form"
        return value

    def words(self) -> list[str]:
        return shlex.split(self.text)


def dockerfile_read(path: Path = ROOT / "Dockerfile") -> list[Instruction]:
    """Instructions in order; comments and blank lines dropped, ``\\`` continuations joined."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # also between continuation lines, as Docker allows
        if not pending:
            start = number
        pending.append(stripped.removesuffix("\\").strip())
        if stripped.endswith("\\"):
            continue
        keyword, _, rest = " ".join(pending).partition(" ")
        instructions.append(Instruction(keyword.upper(), rest.strip(), start))
        pending = []
    assert not pending, f"{path}: a continuation runs past the end"
    return instructions


def dockerfile_env(instructions: list[Instruction]) -> dict[str, str]:
    """The ENV variables the image sets (``ENV A=1 B=2`` form)."""
    found: dict[str, str] = {}
    for instruction in instructions:
        if instruction.keyword == "ENV":
            for word in instruction.words():
                name, sep, value = word.partition("=")
                assert sep, f"line {instruction.line}: use ENV NAME=value"
                found[name] = value
    return found


def shell_commands(text: str) -> list[list[str]]:
    """A RUN's shell text as its ``&&``/``;``-separated commands, each split into words."""
    return [shlex.split(part) for part in re.split(r"&&|;|\|\|", text) if part.strip()]


def _ignore_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus ``**``) as a regex over a path."""
    out = ""
    i = 0
    pattern = pattern.strip("/")
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def dockerignore_rules(path: Path = ROOT / ".dockerignore") -> list[tuple[bool, re.Pattern[str]]]:
    """(excludes, regex) per rule, in order; ``!`` rules include again."""
    rules = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        rules.append((not negated, _ignore_regex(line.removeprefix("!"))))
    return rules


def dockerignored(relative: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether the build context leaves ``relative`` out: the last rule matching the path or
    one of its parent folders decides."""
    parts = relative.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for excludes, regex in rules:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            ignored = excludes
    return ignored


def env_file_read(path: Path) -> dict[str, str]:
    """NAME=value lines, with ``${NAME}`` of earlier lines expanded (as compose does)."""
    found: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Z][A-Z0-9_]*", name), f"{path}: bad line {raw!r}"
        found[name] = re.sub(r"\$\{(\w+)\}", lambda m: found.get(m.group(1), ""), value)
    return found


def entrypoint_commands(path: Path = ROOT / "bin" / "console") -> dict[str, str]:
    """The entry point's commands and what each runs: the arms of its ``case "$command"``."""
    text = path.read_text()
    block = text[text.index('case "$command" in') : text.index("esac")]
    arms = re.findall(r"^\s*([a-z][a-z| -]*)\)\s*(.*?)\s*;;\s*$", block, flags=re.MULTILINE)
    commands: dict[str, str] = {}
    for names, body in arms:
        for name in names.split("|"):
            if not name.strip().startswith("-"):
                commands[name.strip()] = body
    return commands


def _environment_name(node: ast.AST) -> str | None:
    """The variable ``node`` reads from the environment, if it is such a read of a literal name."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        environ_get = called == "get" and "environ" in ast.unparse(func)
        if called in ENV_READERS or called == "getenv" or environ_get:
            return str(node.args[0].value)
    if (
        isinstance(node, ast.Subscript)
        and ast.unparse(node.value) == "os.environ"
        and isinstance(node.slice, ast.Constant)
    ):
        return str(node.slice.value)
    return None


def environment_variables_read(packages: tuple[str, ...]) -> set[str]:
    """Every variable name the code reads from the environment: the first argument of the
    strict readers (console/env.py), ``os.environ.get``/``os.getenv`` and ``os.environ[...]``."""
    names: set[str] = set()
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                name = _environment_name(node)
                if name is not None:
                    names.add(name)
    return names


def readme_configuration_variables(path: Path = ROOT / "README.md") -> set[str]:
    """The variables of README.md's Configuration table (its first column)."""
    text = path.read_text()
    section = text[text.index("## Configuration") :]
    section = section[: section.index("\n## ", 1)]
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", section, flags=re.MULTILINE))
