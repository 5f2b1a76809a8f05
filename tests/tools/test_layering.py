from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import warpcode.tools, warpcode.bench.tools, warpcode.agent.toolbox
heavy = sorted(name for name in sys.modules if name.split(".")[0] in ("torch", "triton", "numpy"))
upward = sorted(name for name in sys.modules if name.startswith(("warpcode.model_runtime", "warpcode.kernels")))
print(heavy + upward)
"""


def test_tools_and_toolbox_import_no_torch_and_nothing_upward() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
