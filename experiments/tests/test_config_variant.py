"""experiments/config_variant.py, run as a process: a variant of the device's config file, in a folder that the
launchers then read (WARPCODE_TUNED_CONFIG_FOLDER; here its tables are passed explicitly), and one-line refusals of
changes that would not make a launch config."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from warpcode.kernels import tuning
from warpcode.kernels.attention_splits import attention_settings

SCRIPT = Path(__file__).resolve().parents[1] / "config_variant.py"
MX_KEY = "2048,768,128,8,mx"
H200 = "NVIDIA_H200.json"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_a_variant_changes_only_the_named_entries_and_the_launchers_read_it(tmp_path):
    change = f"warp_decode/{MX_KEY}/4,8: down_first_tile_early=true, down_max_registers=null"
    result = run(str(tmp_path), change, f"expert_centric/{MX_KEY}/32: num_stages=2", "decode_attention: merge_warps=8")
    assert result.returncode == 0, result.stderr
    base, variant = json.loads((tuning.CONFIG_FOLDER / H200).read_text()), json.loads((tmp_path / H200).read_text())
    for bucket in ("4", "8"):
        expected = {k: v for k, v in base["warp_decode"][MX_KEY][bucket].items() if k != "down_max_registers"}
        assert variant["warp_decode"][MX_KEY][bucket] == {**expected, "down_first_tile_early": True}
    assert variant["expert_centric"][MX_KEY]["32"] == {**base["expert_centric"][MX_KEY]["32"], "num_stages": 2}
    for section in ("warp_decode", "expert_centric"):  # everything else as it was
        for key, entries in base[section].items():
            for bucket, entry in entries.items():
                if (section, key, bucket) not in {("warp_decode", MX_KEY, "4"), ("warp_decode", MX_KEY, "8"),
                                                  ("expert_centric", MX_KEY, "32")}:  # fmt: skip
                    assert variant[section][key][bucket] == entry
    assert variant["decode_attention"] == {**base["decode_attention"], "merge_warps": 8}
    assert {section: data for section, data in variant.items() if section not in {"warp_decode", "expert_centric",
            "decode_attention"}} == {section: data for section, data in base.items()
            if section not in {"warp_decode", "expert_centric", "decode_attention"}}  # fmt: skip
    tables = tuning.tables_for("NVIDIA H200", str(tmp_path))  # as WARPCODE_TUNED_CONFIG_FOLDER names it
    config = tuning.warp_decode_config(2048, 768, 128, 8, 8, True, tables)
    assert config.down_first_tile_early and config.down_max_registers is None
    assert attention_settings(tables).merge_warps == 8


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (f"warp_decode/{MX_KEY}/8: down_rows=48", "warp_decode/2048,768,128,8,mx/8 would not be a valid config"),
        (f"warp_decode/{MX_KEY}/8: down_turbo=true", "would not be a valid config"),
        (f"warp_decode/{MX_KEY}/x: down_rows=64", "bucket 'x' is not a token count"),
        (f"tiles/{MX_KEY}/8: down_rows=64", "unknown section 'tiles'"),
        (f"warp_decode/{MX_KEY}/8: down_rows", "expected FIELD=VALUE"),
        (f"warp_decode/{MX_KEY}/8: down_on_mma=yes", "is not JSON"),
        (f"warp_decode/{MX_KEY}: down_rows=64", "expected SECTION/KEY/BUCKETS"),
        ("decode_attention/1/2: block_n=32", "decode_attention takes SECTION: FIELD=VALUE"),
        ("route: warps=2", "route would not be a valid config"),
        ("mx_linear: tiles=[]", "experiments/mx_linear_variant.py"),
    ],
)
def test_a_change_that_cannot_apply_is_refused_in_one_line(tmp_path, change, message):
    result = run(str(tmp_path), change)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / H200).exists()
