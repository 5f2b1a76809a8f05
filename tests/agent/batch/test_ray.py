"""`warpcode batch --ray local`: a real local Ray instance started by the command (2 CPUs here), reachable only from
loopback and with a token of its own, long-lived job worker actors, a worker killed mid-job by the test, and `local:`
model replicas serving the workers' sessions."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agent.batch.calc_project import PYTEST, fix_turns, make_project, repo_state, run_command
from tests.agent.batch.job_files import read_rows, write_jobs
from tests.agent.scripted_model import write_script
from tests.model_runtime.checkpoints import save_agent_checkpoint, train_bpe
from warpcode.agent.cli.main import main

pytest.importorskip("ray")
# each test starts a private local Ray (or checks there is none): one at a time, even under pytest-xdist
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_ray_instance_at_a_time")]

TIMING_FIELDS = ("duration_s", "worker", "trajectory")


@pytest.fixture(scope="module")
def agent_checkpoint(tmp_path_factory) -> Path:
    return save_agent_checkpoint(tmp_path_factory.mktemp("agent-model"), train_bpe())


def warpcode_batch(*arguments: str, timeout: float = 240) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "warpcode.agent", "batch", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def comparable(rows: list[dict]) -> dict[str, dict]:
    return {row["id"]: {k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in rows}


def stop(driver: subprocess.Popen) -> None:
    """A driver still running (its test failed) is interrupted, so that it stops its Ray instance on the way."""
    if driver.poll() is None:
        driver.terminate()
        try:
            driver.wait(timeout=60)
        except subprocess.TimeoutExpired:
            driver.kill()


@pytest.mark.slow
def test_ray_local_gives_the_same_rows_as_the_in_process_batch(tmp_path: Path):
    repo = make_project(tmp_path / "repo", git_repo=True)
    make_project(tmp_path / "plain", git_repo=False)
    before = repo_state(repo)
    model = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}"
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "git-fix", "repo": "repo", "instruction": "fix add", "test_command": PYTEST},
        {"id": "plain-fix", "repo": "plain", "instruction": "fix add", "test_command": PYTEST},
        {"id": "tests-fail", "repo": "repo", "instruction": "look", "test_command": PYTEST,
         "model": f"scripted:{write_script(tmp_path / 'look.json', [{'text': 'ok'}])}"},
        '{"id": "broken", ',
        {"id": "gone", "repo": "missing", "instruction": "fix"},
    ])  # fmt: skip
    # folders of one length: the prompt names the job's copy, and the scripted model counts its characters
    here, on_ray = tmp_path / "here" / "RESULTS.jsonl", tmp_path / "rays" / "RESULTS.jsonl"

    assert main(["batch", str(jobs), "--out", str(here), "--model", model, "--workers", "2"]) == 1  # two errors
    done = warpcode_batch(
        str(jobs), "--out", str(on_ray), "--model", model, "--workers", "2", "--ray", "local", "--allow-errors"
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # without --json stdout stays empty: Ray's logs do not reach it
    rows_here, rows_ray = read_rows(here), read_rows(on_ray)
    assert comparable(rows_ray) == comparable(rows_here)
    statuses = {row["id"]: row["status"] for row in rows_ray}
    assert statuses == {"git-fix": "succeeded", "plain-fix": "succeeded", "tests-fail": "failed",
                        "line:4": "error", "gone": "error"}  # fmt: skip
    ray_workers = {row["worker"] for row in rows_ray if row["status"] != "error"}
    assert all(worker.startswith("ray:") for worker in ray_workers)
    assert all(Path(row["trajectory"]).is_file() for row in rows_ray if row["trajectory"])
    assert repo_state(repo) == before
    assert not (tmp_path / "rays" / "RESULTS.jsonl.workdirs").exists()


def descendants(root: int) -> set[int]:
    """`root` and every process below it (Ray's GCS, raylet, agents and workers below the driver)."""
    children: dict[int, list[int]] = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = status.read_text()
        except OSError:  # gone meanwhile
            continue
        children.setdefault(int(text[text.rindex(")") + 2 :].split()[1]), []).append(int(status.parent.name))
    found, todo = set(), [root]
    while todo:
        found.add(todo[-1])
        todo.extend(children.get(todo.pop(), []))
    return found


def listening_sockets(pids: set[int]) -> dict[int, list[ipaddress.IPv4Address | ipaddress.IPv6Address]]:
    """Which of these processes listen on TCP, and on which local addresses (from /proc/net/tcp and tcp6)."""
    owners = {}
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            with contextlib.suppress(OSError):  # gone meanwhile
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    owners[target[len("socket:[") : -1]] = pid
    listening: dict[int, list] = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in owners:  # LISTEN
                words = bytes.fromhex(fields[1].split(":")[0])  # each 32-bit word in host (little-endian) order
                raw = b"".join(words[i : i + 4][::-1] for i in range(0, len(words), 4))
                listening.setdefault(owners[fields[9]], []).append(ipaddress.ip_address(raw))
    return listening


def is_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def assert_private_instance(driver: int, state: Path, home: Path) -> None:
    """Every socket of the local instance listens on loopback; its token is a 0600 file in warpcode's state
    directory (0700), handed to every Ray server, and Ray wrote none of its own under HOME."""
    servers = listening_sockets(descendants(driver))
    addresses = [address for listened in servers.values() for address in listened]
    assert len(servers) >= 4, servers  # the driver, the GCS, the raylet and the workers at least
    assert all(is_loopback(address) for address in addresses), addresses
    tokens = list((state / "ray").iterdir())
    assert len(tokens) == 1 and tokens[0].read_text().strip()
    assert stat.S_IMODE(tokens[0].stat().st_mode) == 0o600 and stat.S_IMODE((state / "ray").stat().st_mode) == 0o700
    # Ray's servers proper (C++: the GCS and the raylet) keep their environment as started; its Python workers write
    # their process titles over theirs (setproctitle reuses that memory), so only the servers are read
    checked = 0
    for pid in servers.keys() - {driver}:  # (the driver's environ is what it started with, before the settings)
        try:
            program = Path(os.readlink(f"/proc/{pid}/exe")).name
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if program not in ("gcs_server", "raylet"):
            continue
        variables = environ.split(b"\0")
        assert b"RAY_AUTH_MODE=token" in variables and f"RAY_AUTH_TOKEN_PATH={tokens[0]}".encode() in variables
        checked += 1
    assert checked >= 2, servers  # the GCS and the raylet
    assert not (home / ".ray").exists()


@pytest.mark.slow
def test_a_private_local_instance_replaces_a_worker_killed_mid_job(tmp_path: Path):
    repo = make_project(tmp_path / "repo", git_repo=True)
    before = repo_state(repo)
    slow = f"scripted:{write_script(tmp_path / 'slow.json', fix_turns([run_command('sleep 3')]))}"
    jobs = write_jobs(tmp_path / "jobs.jsonl", [
        {"id": "victim", "repo": "repo", "instruction": "fix", "model": slow},
        *({"id": f"other-{n}", "repo": "repo", "instruction": "fix"} for n in range(3)),
    ])  # fmt: skip
    out = tmp_path / "RESULTS.jsonl"
    quick = f"scripted:{write_script(tmp_path / 'fix.json', fix_turns())}"
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(jobs), "--out", str(out), "--model", quick,
               "--ray", "local", "--workers", "2", "--json"]  # fmt: skip
    state, home = tmp_path / "state", tmp_path / "home"
    environment = {**os.environ, "WARPCODE_STATE_DIR": str(state), "HOME": str(home)}
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    events, killed = [], None
    try:
        for line in driver.stdout:
            event = json.loads(line)  # stdout holds the event lines and nothing else
            events.append(event)
            if event["event"] == "started" and event["id"] == "victim" and killed is None:
                assert_private_instance(driver.pid, state, home)
                time.sleep(1.0)  # inside its turn's `sleep 3`
                killed = event["pid"]
                os.kill(killed, signal.SIGKILL)
        assert driver.wait(timeout=240) == 0, driver.stderr.read()
    finally:
        stop(driver)
    rows = {row["id"]: row for row in read_rows(out)}
    assert sorted(rows) == ["other-0", "other-1", "other-2", "victim"]  # every job once
    assert all(row["status"] == "succeeded" for row in rows.values()), rows
    victim = rows["victim"]
    assert victim["attempts"] == 2 and f":{killed}/" not in victim["worker"]
    assert all(row["attempts"] == 1 for key, row in rows.items() if key != "victim")
    assert [e["attempt"] for e in events if e["event"] == "retry"] == [2]
    assert events[-1]["event"] == "summary" and events[-1]["succeeded"] == 4
    assert repo_state(repo) == before  # the dead worker's worktree was not left registered
    assert list((state / "ray").iterdir()) == []  # the token went with the instance


@pytest.mark.slow
def test_replicas_serve_every_session_of_the_batch(tmp_path: Path, agent_checkpoint: Path):
    repo = make_project(tmp_path / "repo", git_repo=True)
    before = repo_state(repo)
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": f"j{n}", "repo": "repo", "instruction": "hi"} for n in range(4)])
    out = tmp_path / "RESULTS.jsonl"
    done = warpcode_batch(str(jobs), "--out", str(out), "--model", f"local:{agent_checkpoint}", "--ray", "local",
                          "--replicas", "2", "--replica-gpus", "0.5", "--workers", "2", timeout=400)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert len(rows) == 4 and all(row["status"] == "succeeded" for row in rows), rows
    assert all(row["usage"]["model_requests"] == 1 and row["usage"]["input_tokens"] > 0 for row in rows)
    replicas = [row["worker"].rsplit("-> replica ", 1)[1] for row in rows]
    assert set(replicas) == {"0", "1"}  # the sessions spread over both
    for number in "01":
        assert f"replica {number}: {replicas.count(number)} sessions" in done.stderr
    assert repo_state(repo) == before


def test_ray_options_are_checked_before_anything_runs(tmp_path: Path, capsys):
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": "a", "repo": ".", "instruction": "x"}])
    out = str(tmp_path / "RESULTS.jsonl")
    assert main(["batch", str(jobs), "--out", out, "--replicas", "2"]) == 1
    assert main(["batch", str(jobs), "--out", out, "--ray", "local", "--replicas", "1", "--model", "scripted:x"]) == 1
    first, second = capsys.readouterr().err.strip().splitlines()[-2:]
    assert first.startswith(
        "warpcode batch: error: --replicas needs --ray (local, auto or a cluster address): replicas are Ray actors"
    )
    assert second.startswith(
        "warpcode batch: error: --replicas serves a local:DIR or random:PRESET model; --model is 'scripted:"
    )  # (the path made absolute from the current folder, as every --model path is)


@pytest.mark.slow
def test_ray_auto_without_a_cluster_and_ray_not_installed_are_one_line_errors(tmp_path: Path):
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": "a", "repo": ".", "instruction": "x"}])
    out = str(tmp_path / "RESULTS.jsonl")
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    # `auto` looks for a cluster in Ray's temporary folder (/tmp/ray): an empty one of the test's own, so that an
    # instance another test (or program) is starting or stopping there is not found half-alive
    env["RAY_TMPDIR"] = str(tmp_path / "no-cluster")
    (tmp_path / "no-cluster").mkdir()
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(jobs), "--out", out, "--model", "scripted:x"]
    auto = subprocess.run([*command, "--ray", "auto"], capture_output=True, text=True, timeout=120, env=env)
    assert auto.returncode == 1
    assert (
        auto.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "warpcode batch: error: --ray auto: no Ray cluster answers "
            "(start one with `ray start --head`, or use --ray local)"
        )
    )
    no_ray = "import sys; sys.modules['ray'] = None; from warpcode.agent.cli import main; sys.exit(main(sys.argv[1:]))"
    missing = subprocess.run(
        [sys.executable, "-c", no_ray, "batch", str(jobs), "--out", out, "--model", "scripted:x", "--ray", "local"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 1
    assert (
        missing.stderr.strip()
        .splitlines()[-1]
        .startswith("warpcode batch: error: --ray needs Ray, an optional extra: pip install 'warpcode[distributed]'")
    )


def test_ray_local_refuses_a_ray_without_token_authentication(tmp_path: Path):
    jobs = write_jobs(tmp_path / "jobs.jsonl", [{"id": "a", "repo": ".", "instruction": "x"}])
    older = tmp_path / "older" / "ray-2.51.0.dist-info"  # found before the installed Ray's own metadata
    older.mkdir(parents=True)
    (older / "METADATA").write_text("Metadata-Version: 2.1\nName: ray\nVersion: 2.51.0\n")
    environment = {**os.environ, "PYTHONPATH": str(older.parent), "WARPCODE_STATE_DIR": str(tmp_path / "state")}
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(jobs), "--out", str(tmp_path / "RESULTS.jsonl"),
               "--model", "scripted:x", "--ray", "local"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "warpcode batch: error: --ray local needs Ray 2.52 or later (token authentication), and Ray 2.51.0 is "
            "installed: pip install -U 'warpcode[distributed]'"
        )
    )
    assert not (tmp_path / "state" / "ray").exists()


def test_replica_resources_fail_fast_when_the_cluster_lacks_gpus():
    from warpcode.agent.batch.replicas import replica_resources

    assert replica_resources(0, 2, 1.0) == ({"num_gpus": 0, "num_cpus": 0}, "on the CPU: the cluster has no GPU")
    assert replica_resources(2, 2, 1.0)[0] == {"num_gpus": 1.0, "num_cpus": 1}
    assert replica_resources(1, 2, 0.5) == ({"num_gpus": 0.5, "num_cpus": 1}, "0.5 GPU each (1 in the cluster)")
    with pytest.raises(ValueError, match=r"--replicas 2 with --replica-gpus 1 needs 2 GPUs and the cluster has 1"):
        replica_resources(1, 2, 1.0)
