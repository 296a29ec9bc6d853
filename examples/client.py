"""Start a governed run from another service and poll it, over the console's REST API.

Standard library only. Usage::

    python examples/client.py --url http://127.0.0.1:8000 --user alice --password demo \\
        --agent helpdesk --text "Customer C-42 was charged twice: credit 30 USD."

The full API is described at /api/schema/ (OpenAPI 3) and browsable at /api/docs/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

STOP = {"waiting", "completed", "failed", "cancelled", "dead"}


def call(
    base: str,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    request = urllib.request.Request(
        f"{base.rstrip('/')}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={
            "Accept": "application/json",
            **({"Content-Type": "application/json"} if body is not None else {}),
            **({"Authorization": f"Token {token}"} if token else {}),
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{method} {path}: {exc.code} {exc.read().decode()}") from None


def token_get(base: str, *, username: str, password: str) -> str:
    answer = call(
        base, "POST", "/api/auth/token/", body={"username": username, "password": password}
    )
    return answer["token"]


def run_start(base: str, *, token: str, agent: str, input: dict[str, Any], key: str) -> Any:
    """Start a run. Sending the same Idempotency-Key again returns the same run, not a new one."""
    return call(
        base,
        "POST",
        "/api/runs/",
        token=token,
        body={"agent": agent, "input": input},
        headers={"Idempotency-Key": key},
    )


def run_poll(base: str, *, token: str, run_id: str, timeout: float = 120.0) -> Any:
    """Poll until the run waits for a person or ends."""
    deadline = time.monotonic() + timeout
    delay = 0.5
    while True:
        run = call(base, "GET", f"/api/runs/{run_id}/", token=token)
        if run["status"] in STOP or time.monotonic() > deadline:
            return run
        time.sleep(delay)
        delay = min(delay * 1.5, 5.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--password", default="demo")
    parser.add_argument("--agent", default="helpdesk")
    parser.add_argument("--text", default="Customer C-42 was charged twice: credit 30 USD.")
    parser.add_argument("--key", default="", help="Idempotency-Key (default: a new one)")
    args = parser.parse_args(argv)

    token = token_get(args.url, username=args.user, password=args.password)
    run_input = {"messages": [{"role": "user", "content": args.text}]}
    run = run_start(
        args.url, token=token, agent=args.agent, input=run_input, key=args.key or str(uuid.uuid4())
    )
    print(f"run {run['id']} {run['status']}")
    run = run_poll(args.url, token=token, run_id=run["id"])
    print(f"run {run['id']} {run['status']}")
    for approval in run["approvals"]:
        if approval["status"] == "pending":
            print(
                f"  approval {approval['id']}: {approval['tool']} {json.dumps(approval['args'])} "
                f"(tier {approval['tier']}) - decide at {args.url}/approvals/{approval['id']}/"
            )
    return 0 if run["status"] in ("waiting", "completed") else 1


if __name__ == "__main__":
    sys.exit(main())
