"""The compose deployment's counters: its web container (gunicorn, several processes) and its
worker container (the qcluster) share one PROMETHEUS_MULTIPROC_DIR on the console-var volume,
so one scrape adds up the decisions and the advances. Each container numbers its processes
from 1: the same pid in two containers must not write the same file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from core.prometheus import exposition
from tests.console.test_prometheus import value

ROOT = Path(__file__).resolve().parents[2]

# A process of container ``host`` whose pid is 7 (as in every container): one decision
# observed per line read, "ok" written back, so two can be interleaved while both live.
CONTAINER_PROCESS = """
import os, socket, sys
socket.gethostname = lambda: sys.argv[1]
os.getpid = lambda: 7
from core.prometheus import decision_observe
for _ in sys.stdin:
    decision_observe(tier="write", decision="approve", seconds=1)
    print("ok", flush=True)
"""


def test_two_containers_whose_processes_share_a_pid_keep_every_count(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CONTAINER_PROCESS, host],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for host in ("web-container", "worker-container")
    ]
    try:
        for _ in range(2):
            for process in processes:  # interleaved: both alive, both writing
                process.stdin.write("observe\n")
                process.stdin.flush()
                assert process.stdout.readline().strip() == "ok"
    finally:
        for process in processes:
            process.stdin.close()
            process.wait(timeout=30)

    text = exposition(path=str(tmp_path)).decode()
    count = value(text, "console_decision_latency_seconds_count", tier="write", decision="approve")
    assert count == 4


def test_compose_gives_web_and_worker_one_metrics_directory_on_their_shared_volume():
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    dirs = {
        name: (services[name].get("environment") or {}).get("PROMETHEUS_MULTIPROC_DIR")
        for name in ("web", "worker")
    }
    assert dirs["web"] and dirs["web"] == dirs["worker"], dirs
    assert dirs["web"].startswith("/app/var/")  # console-var:/app/var, mounted by both
    assert services["web"]["volumes"] == services["worker"]["volumes"] == ["console-var:/app/var"]
