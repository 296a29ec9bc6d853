"""Downstream calls that time out, injected into real worker processes (the chaos test).

A worker started with ``faulty_worker_env(...)`` runs the settings module
``tests.support.fault_settings``, which adds ``FaultsConfig`` to the installed apps; its
``ready()`` (after the agents app registered the sandbox tools) wraps the ``run`` of each tool
the plan names: the one patch point per downstream call, as
tests/agents/trust/test_unknown_outcomes.py patches it in-process. Nothing here is product
code, and the plan comes from a variable only this module reads (``CHAOS_FAULTS``)::

    {"dir": "<marker directory>", "hang_s": 3.0,
     "faults": [{"tool": "rollback_deploy", "service": "fault-03", "kind": "after", "times": 2}]}

``after``: the downstream acts (the sandbox commits its row), then its answer never comes.
``before``: no answer, and the downstream never acts. ``late``: no answer, and the downstream
acts ``hang_s`` later, long after the console stopped waiting: the request reached it, and it
works on it in a process of its own, which a kill of the worker does not stop. Each call
outlasts ``TOOL_TIMEOUT_SECONDS`` (by ``hang_s``, or the fault's own ``hang_s``), so the
ledger's own timeout fires. The first ``times`` calls under
each idempotency key of the named tool and service fault; one marker file per faulted call
(created with O_EXCL) counts them across processes and restarts, so a worker killed and started
again does not fault the same key forever, and the test can read what was injected.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.apps import AppConfig

ENV = "CHAOS_FAULTS"
SETTINGS_MODULE = "tests.support.fault_settings"
KINDS = ("after", "before", "late")
# notify_channel's args carry the service only in the message: "[sev2] fault-03: ...".
MESSAGE_SERVICE = re.compile(r"^\[[a-z0-9]+\] ([a-z0-9][a-z0-9_-]*):")


def faulty_worker_env(
    *, directory: Path, faults: list[dict[str, Any]], hang_s: float, tool_timeout_s: float
) -> dict[str, str]:
    """The environment that makes a worker inject ``faults`` (see the module docstring)."""
    for fault in faults:
        if fault["kind"] not in KINDS or fault["times"] < 1:
            raise ValueError(f"bad fault {fault!r}")
    if min([hang_s, *(f.get("hang_s", hang_s) for f in faults)]) <= tool_timeout_s:
        raise ValueError("a hang must outlast the tool timeout, or nothing times out")
    directory.mkdir(parents=True, exist_ok=True)
    plan = {"dir": str(directory), "hang_s": hang_s, "faults": faults}
    return {
        "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
        ENV: json.dumps(plan),
        "TOOL_TIMEOUT_SECONDS": str(tool_timeout_s),
    }


def faults_injected(directory: Path) -> dict[str, list[str]]:
    """{idempotency key: [kind of each faulted call]} read off the marker files."""
    found: dict[str, list[str]] = {}
    for marker in sorted(directory.glob("*.fault")):
        record = json.loads(marker.read_text())
        found.setdefault(record["key"], []).append(record["kind"])
    return found


def faults_acted(directory: Path) -> set[str]:
    """The keys whose downstream acted in an ``after`` call: a kill of the worker before the
    sandbox committed its row leaves the call's marker without its ``.acted`` twin."""
    return {json.loads(m.read_text())["key"] for m in directory.glob("*.acted")}


def service_of(args: Mapping[str, Any]) -> str | None:
    if isinstance(args.get("service"), str):
        return args["service"]
    match = MESSAGE_SERVICE.match(str(args.get("message", "")))
    return match.group(1) if match else None


def _marker_take(directory: Path, *, key: str, kind: str, times: int) -> Path | None:
    """Claim the next of the ``times`` faulted calls of ``key``; None once all are taken."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    for n in range(times):
        path = directory / f"{digest}.{n}.fault"
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as marker:
            json.dump({"key": key, "kind": kind, "call": n, "pid": os.getpid()}, marker)
        return path
    return None


def _faulty(run: Any, *, plan: dict[str, Any], by_service: dict[str, dict[str, Any]]) -> Any:
    from agents.effects.errors import ToolTimeout

    directory = Path(plan["dir"])

    def faulty_run(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        fault = by_service.get(service_of(args) or "")
        if fault is None or not key:
            return run(args, key)
        marker = _marker_take(directory, key=key, kind=fault["kind"], times=fault["times"])
        if marker is None:
            return run(args, key)
        hang_s = fault.get("hang_s", plan["hang_s"])
        if fault["kind"] == "after":
            run(args, key)  # the downstream acts; the answer is what gets lost
            marker.with_suffix(".acted").write_text(marker.read_text())
        elif fault["kind"] == "late":
            _land_later(directory, tool=fault["tool"], args=args, key=key, delay=hang_s)
        time.sleep(hang_s)
        raise ToolTimeout(f"injected: no answer ({fault['kind']})")

    return faulty_run


def _land_later(
    directory: Path, *, tool: str, args: dict[str, Any], key: str, delay: float
) -> None:
    """The downstream acts on this call ``delay`` seconds from now, in its own process and
    session (``python -m tests.support.faults``), whatever happens to this worker."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["DJANGO_SETTINGS_MODULE"] = "console.settings"  # the real tool, not this wrapper
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    with (directory / f"{digest}.late.log").open("ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.faults", tool, key, json.dumps(args)]
            + [str(time.time() + delay)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class FaultsConfig(AppConfig):
    name = "tests.support.faults"
    label = "chaos_faults"
    verbose_name = "Chaos test faults"

    def ready(self) -> None:
        from agents.tools import tool_get, tool_register

        plan = json.loads(os.environ.get(ENV) or "{}")
        tools: dict[str, dict[str, dict[str, Any]]] = {}
        for fault in plan.get("faults", []):
            tools.setdefault(fault["tool"], {})[fault["service"]] = fault
        for name, by_service in tools.items():
            spec = tool_get(name)
            run = _faulty(spec.run, plan=plan, by_service=by_service)
            tool_register(dataclasses.replace(spec, run=run))


def _land(tool: str, key: str, args: str, at: str) -> None:
    """The downstream's late action (see ``_land_later``)."""
    import django

    django.setup()
    from agents.tools import tool_get

    time.sleep(max(0.0, float(at) - time.time()))
    result = tool_get(tool).run(json.loads(args), key)
    print(f"landed {tool} {key} at {time.time():.3f}: {result}", flush=True)


if __name__ == "__main__":
    _land(*sys.argv[1:5])
