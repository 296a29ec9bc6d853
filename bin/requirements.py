"""Print the pinned dependencies of pyproject.toml, one per line, for ``pip install -r``.

The one way the project lists what to install: the Makefile's venv (runtime + dev, with
``--dev``) and the container image (runtime only) both read it, so they cannot drift apart.
Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(*, dev: bool, pyproject: Path = PYPROJECT) -> list[str]:
    """The runtime dependencies, then (with ``dev``) the dev extra's, in file order."""
    with pyproject.open("rb") as file:
        project = tomllib.load(file)["project"]
    found = list(project["dependencies"])
    if dev:
        found += project["optional-dependencies"]["dev"]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", action="store_true", help="add the dev extra (tests, lint)")
    args = parser.parse_args(argv)
    sys.stdout.write("".join(f"{line}\n" for line in requirements(dev=args.dev)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
