"""`warpcode batch --ray local` killed with SIGKILL (no clean-up code runs): its private Ray instance (GCS, raylet,
agents, workers) and the commands its jobs were running go with it within seconds, not minutes later."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agent.batch.calc_project import make_project, run_command
from tests.agent.batch.job_files import write_jobs
from tests.agent.scripted_model import write_script

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_ray_instance_at_a_time")]

GONE_WITHIN_S = 10.0


def instance_processes(state: Path, driver: int) -> dict[int, str]:
    """pid -> command line of the live processes started for the driver: all of them, and only them, inherit
    WARPCODE_STATE_DIR=`state` (unique to the test), or hold files open in its Ray session folder (those whose
    process title overwrote their environment)."""
    marker, session = f"WARPCODE_STATE_DIR={state}".encode(), re.compile(rf"/session_[^/]*_{driver}/")
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == driver:
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
            if stat[stat.rindex(b")") + 2 :].startswith(b"Z"):
                continue  # dead, not yet reaped
            files = [os.readlink(f"{entry.path}/fd/{fd}") for fd in os.listdir(f"{entry.path}/fd")]
            if marker in Path(entry.path, "environ").read_bytes().split(b"\0") or any(map(session.search, files)):
                found[int(entry.name)] = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()[:100]
        except OSError:
            continue
    return found


def test_a_killed_driver_takes_its_ray_instance_with_it(tmp_path: Path) -> None:
    make_project(tmp_path / "repo", git_repo=False)
    model = write_script(tmp_path / "model.json", [run_command("sleep 300"), {"text": "done"}])
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": "long", "repo": "repo", "instruction": "wait"}])
    state = tmp_path / "state"
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(jobs), "--out", str(tmp_path / "R.jsonl"),
               "--model", f"scripted:{model}", "--mode", "auto", "--ray", "local"]  # fmt: skip
    driver = subprocess.Popen(command, env={**os.environ, "WARPCODE_STATE_DIR": str(state)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any("sleep 300" in line for line in instance_processes(state, driver.pid).values()):
            assert driver.poll() is None and time.monotonic() < deadline, "the job's command never started"
            time.sleep(0.2)
        before = instance_processes(state, driver.pid)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        killed = time.monotonic()
        while (left := instance_processes(state, driver.pid)) and time.monotonic() - killed < GONE_WITHIN_S:
            time.sleep(0.2)
        print(f"{len(before)} processes; after SIGKILL, gone in {time.monotonic() - killed:.1f} s")
        assert not left, f"still running {GONE_WITHIN_S} s after the driver was killed: {sorted(left.values())}"
        assert any("DashboardAgent" in line for line in before.values())  # what stayed a minute before
        while list((state / "ray").glob("*.token")) and time.monotonic() - killed < GONE_WITHIN_S:
            time.sleep(0.1)  # removed once the processes are gone
        assert not list((state / "ray").glob("*.token")), "the instance's token file was left behind"
    finally:
        driver.kill()
        for pid in instance_processes(state, driver.pid):  # what this test started, only
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
