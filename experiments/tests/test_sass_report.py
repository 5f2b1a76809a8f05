"""experiments/sass_report.py: its loop finder on a hand-written SASS listing, and one compile case reported end to end
(sm_90, no GPU, in a process without TRITON_INTERPRET)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "sass_report.py"
sys.path.insert(0, str(SCRIPT.parent))
from sass_report import sass_loops  # noqa: E402

LISTING = """Function:_kernel
--:-:-:-:1\tMOV R1, c[0x0][0x28];
--:-:-:-:5\t@P0 BRA LBB1;
LBB0:
--:-:-:-:1\tLDG.E R2, desc[UR4][R4.64];
02:-:-:-:4\tFFMA R3, R2, R2, R3;
--:-:-:Y:f\tFFMA R5, R2, R3, R5;
--:-:-:-:5\t@!P1 BRA LBB0;
LBB1:
--:-:-:-:1\tEXIT;
--:-:-:Y:0\tBRA LBB2;
LBB2:
"""


def test_loops_are_the_backward_branches():
    [(label, count, opcodes)] = sass_loops(LISTING)
    assert (label, count) == ("LBB0", 4)
    assert opcodes == {"LDG": 1, "FFMA": 2, "BRA": 1}


@pytest.mark.slow
def test_a_compile_case_is_reported():
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cases", "sum slots"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("sum slots:")]
    assert "registers" in line and "spills 0 B" in line, done.stdout
