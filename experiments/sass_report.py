"""What the GPU would run, read on a machine without one: each sm_90 case of tests/kernels/compile_sm90.py compiled
by the installed Triton, with its registers, spills and shared memory, and per loop of its SASS the instruction
count and the most frequent opcodes.

    python3 experiments/sass_report.py [--cases "MX down"] [--maxnreg 168] [--dump DIR]

Install the device's Triton in a virtual environment of its own (`pip install triton==3.6.0`, beside this package)
so that the code is the device's. Registers decide how many programs an SM holds (65,536 registers: 160 a thread
on two warps leave room for 6), and a loop's instructions per weight (its count over the weights a thread handles
in one iteration) what its issue slots cost.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "kernels"))
import compile_sm90  # the cases live beside the test that compiles them

# A SASS line as Triton dumps it: control codes, an optional predicate, then the opcode.
INSTRUCTION = re.compile(r"^[0-9a-f-]+:[0-9a-f-]:[0-9a-f-]:[-Y]:[0-9a-f]+\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)")
LABEL = re.compile(r"^(\.?L\w+|LBB\w*):")


def sass_loops(sass: str) -> list[tuple[str, int, collections.Counter]]:
    """(label, instructions, opcode counts) of each loop: a branch back to a label above it."""
    labels, instructions = {}, []
    for line in sass.splitlines():
        if label := LABEL.match(line):
            labels[label.group(1)] = len(instructions)
        elif instruction := INSTRUCTION.match(line):
            instructions.append((instruction.group(1).split(".")[0], instruction.group(2)))
    loops = []
    for end, (opcode, operands) in enumerate(instructions):
        words = operands.strip().rstrip(";").split()
        target = words[-1] if words else ""
        if opcode == "BRA" and labels.get(target, end + 1) < end:
            body = instructions[labels[target] : end + 1]
            loops.append((target, len(body), collections.Counter(op for op, _ in body)))
    return loops


def resource_usage(cubin: bytes) -> dict[str, int]:
    """REG, STACK, SHARED, LOCAL, ... of the cubin's kernel, as cuobjdump (bundled with Triton) reports them."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.cubin")
        Path(path).write_bytes(cubin)
        report = subprocess.run([str(tool), "--dump-resource-usage", path], capture_output=True, text=True).stdout
    return {key: int(value) for key, value in re.findall(r"([A-Z]+)(?:\[\d+\])?:(\d+)", report)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="", help="only the cases whose name contains this text")
    parser.add_argument("--maxnreg", type=int, help="cap the registers a thread (ptxas' maxnreg)")
    parser.add_argument("--dump", type=Path, help="write each case's ttgir and sass into this folder")
    args = parser.parse_args(argv)
    cases = [case for case in compile_sm90.CASES if args.cases in case[0]]
    if not cases:
        parser.error(f"no compile case's name contains {args.cases!r}")
    print(f"# triton {triton.__version__}")
    for name, kernel, signature, constants, options in cases:
        options = {**options, **({"maxnreg": args.maxnreg} if args.maxnreg else {})}
        compiled = compile_sm90.compile_sm90(kernel, signature, constants, options)
        usage = resource_usage(compiled.asm["cubin"])
        threads = 32 * options.get("num_warps", 4)
        per_sm = 65536 // (threads * max(usage.get("REG", 1), 1))
        spills = usage.get("STACK", 0) + usage.get("LOCAL", 0)
        print(f"{name}: {usage.get('REG')} registers ({per_sm} programs an SM by registers), spills {spills} B, "
              f"shared {compiled.metadata.shared} B")  # fmt: skip
        for label, count, opcodes in sass_loops(compiled.asm["sass"]):
            if count > 1:
                print(
                    f"    loop {label}: {count} instructions: "
                    + ", ".join(f"{op} {n}" for op, n in opcodes.most_common(10))
                )
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            stem = re.sub(r"\W+", "_", name).strip("_")
            (args.dump / f"{stem}.ttgir").write_text(compiled.asm["ttgir"])
            (args.dump / f"{stem}.sass").write_text(compiled.asm["sass"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
