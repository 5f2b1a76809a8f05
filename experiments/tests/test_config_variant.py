"""experiments/config_variant.py, run as a process: a variant of the kernel config file that the launchers then read
(WARPCODE_WARP_DECODE_CONFIGS), and one-line refusals of changes that would not make a launch config."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.kernels import tuning

SCRIPT = Path(__file__).resolve().parents[1] / "config_variant.py"
MX_KEY = "2048,768,128,8,mx"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def clear_config_caches():
    for cached in (tuning.measured, tuning._config_for_bucket, tuning._measured_grouped_gemm_config):
        cached.cache_clear()


@pytest.fixture
def variant_file(tmp_path, monkeypatch):
    """A path for the variant, which the launchers' tables read (their caches cleared before and after)."""
    path = tmp_path / "variant.json"
    monkeypatch.setenv("WARPCODE_WARP_DECODE_CONFIGS", str(path))
    clear_config_caches()
    yield path
    clear_config_caches()


@pytest.mark.slow
def test_a_variant_changes_only_the_named_entries_and_the_launchers_read_it(variant_file):
    out = variant_file
    change = f"configs/{MX_KEY}/4,8: down_first_tile_early=true, down_max_registers=null"
    result = run(str(out), change, f"expert_centric/{MX_KEY}/32: num_stages=2")
    assert result.returncode == 0, result.stderr
    base, variant = json.loads(tuning.CONFIG_FILE.read_text()), json.loads(out.read_text())
    for bucket in ("4", "8"):
        expected = {k: v for k, v in base["configs"][MX_KEY][bucket].items() if k != "down_max_registers"}
        assert variant["configs"][MX_KEY][bucket] == {**expected, "down_first_tile_early": True}
    assert variant["expert_centric"][MX_KEY]["32"] == {**base["expert_centric"][MX_KEY]["32"], "num_stages": 2}
    for section in ("configs", "expert_centric"):  # everything else as it was
        for key, entries in base[section].items():
            for bucket, entry in entries.items():
                if (section, key, bucket) not in {("configs", MX_KEY, "4"), ("configs", MX_KEY, "8"),
                                                  ("expert_centric", MX_KEY, "32")}:  # fmt: skip
                    assert variant[section][key][bucket] == entry
    config = tuning.warp_decode_config(2048, 768, 128, 8, 8, True)
    assert config.down_first_tile_early and config.down_max_registers is None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (f"configs/{MX_KEY}/8: down_rows=48", "configs/2048,768,128,8,mx/8 would not be a valid config"),
        (f"configs/{MX_KEY}/8: down_turbo=true", "would not be a valid config"),
        (f"configs/{MX_KEY}/3: down_rows=64", "has no bucket 3"),
        ("configs/1,2,3,4/8: down_rows=64", "has no configs/1,2,3,4"),
        (f"tiles/{MX_KEY}/8: down_rows=64", "unknown section 'tiles'"),
        (f"configs/{MX_KEY}/8: down_rows", "expected FIELD=VALUE"),
        (f"configs/{MX_KEY}/8: down_on_mma=yes", "is not JSON"),
        (f"configs/{MX_KEY}: down_rows=64", "expected SECTION/KEY/BUCKETS"),
    ],
)
def test_a_change_that_cannot_apply_is_refused_in_one_line(tmp_path, change, message):
    out = tmp_path / "variant.json"
    result = run(str(out), change)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()
