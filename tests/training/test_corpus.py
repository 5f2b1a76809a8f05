"""The pre-training corpus: which packages' licences let them in, the split by whole package with no held-out text
reaching training through a copy, and the packed token stream read back as windows."""

from __future__ import annotations

from email.message import Message as Metadata
from pathlib import Path

import numpy as np
import pytest

from tests.training.site_packages import add_distribution, code_site
from warpcode.training.corpus import (
    TokenWindows,
    find_packages,
    is_held_out,
    license_of,
    pack_tokens,
    spdx_permissive,
    split_documents,
)


def metadata(**fields: str | list[str]) -> Metadata:
    message = Metadata()
    for key, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            message[key.replace("_", "-")] = item
    return message


MIT, BSD, MPL = ("License :: OSI Approved :: MIT License", "License :: OSI Approved :: BSD License",
                 "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)")  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "permissive"),
    [
        # PEP 639 expressions (what torch, numpy, tqdm, regex write)
        ({"License_Expression": "Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause AND BSL-1.0"}, True),
        ({"License_Expression": "BSD-3-Clause AND 0BSD AND MIT AND Zlib AND CC0-1.0"}, True),
        ({"License_Expression": "MPL-2.0 AND MIT"}, False),
        ({"License_Expression": "(MIT OR GPL-3.0-or-later) AND Apache-2.0"}, True),
        ({"License_Expression": "GPL-2.0-only WITH Classpath-exception-2.0"}, False),
        ({"License_Expression": "LicenseRef-Proprietary-Thing"}, False),
        # the expression decides over classifiers that say otherwise
        ({"License_Expression": "MIT", "Classifier": MPL}, True),
        # classifiers: every one must be permissive
        ({"Classifier": [MIT, BSD, "Programming Language :: Python"]}, True),
        ({"Classifier": [MIT, MPL]}, False),
        # free text (what older packages and ray, transformers write)
        ({"License": "Apache 2.0 License"}, True),
        ({"License": "3-Clause BSD License"}, True),
        ({"License": "MIT OR Apache-2.0"}, True),
        ({"License": "BSD License\n\nRedistribution ... under the GNU GPL for the bundled parts"}, False),
        ({"License": "Proprietary"}, False),
        ({}, False),
    ],
)
def test_licence_decisions(fields, permissive):
    assert license_of(metadata(**fields))[1] is permissive


def test_licence_expressions_that_are_not_spdx_are_refused():
    for bad in ("MIT AND", "(MIT", "Apache 2.0", "MIT Apache-2.0"):
        with pytest.raises(ValueError):
            spdx_permissive(bad)


def test_the_held_out_packages_are_fixed_by_name():
    held = [name for name in ("requests", "six", "statsmodels", "numpy", "torch", "transformers") if is_held_out(name)]
    assert held == ["requests", "six", "statsmodels"]


def test_split_by_package_without_held_out_text_in_training(tmp_path):
    site = code_site(tmp_path)
    shared = (site / "six" / "glob.py").read_text()
    # delta ships a copy of a held-out file, a vendored project, its own file, and a file RECORD does not list
    add_distribution(site, "delta", {"delta/copied_glob.py": shared, "delta/_vendor/lib.py": "x = 1\n",
                                     "delta/own.py": "def own():\n    return 1\n"}, "License: MIT")  # fmt: skip
    (site / "delta" / "unlisted.py").write_text("def unlisted():\n    pass\n")
    packages = {p.name: p for p in find_packages([site])}
    assert {name: (p.permissive, p.split) for name, p in packages.items()} == {
        "alpha": (True, "train"), "delta": (True, "train"), "gamma": (False, "train"), "six": (True, "heldout"),
    }  # fmt: skip
    assert [f.name for f in packages["delta"].files] == ["copied_glob.py", "own.py"]
    documents = split_documents(packages.values())
    assert len(documents.heldout) == 3 and shared in documents.heldout
    assert shared not in documents.train
    assert "def own():\n    return 1\n" in documents.train
    assert (site / "gamma" / "heapq.py").read_text() not in documents.train
    assert len(documents.train) == 7 + 1  # alpha's modules and delta's own file


def test_packed_stream_reads_back_as_windows(tmp_path):
    documents = [[5, 6, 7], [8], [9, 10, 11, 12, 13]]
    count = pack_tokens(iter([list(d) for d in documents]), separator=0, path=tmp_path / "t.tokens")
    assert count == 12
    windows = TokenWindows(tmp_path / "t.tokens", 4)
    assert len(windows) == 2  # 12 tokens: windows [0, 5) and [4, 9) of inputs plus next token
    assert windows.window(0).tolist() == [5, 6, 7, 0, 8]
    assert windows.window(1).tolist() == [8, 0, 9, 10, 11]
    assert windows.window(0).dtype == np.int64
    with pytest.raises(ValueError, match="fewer than one window"):
        TokenWindows(tmp_path / "t.tokens", 12)


def test_unreadable_and_oversized_files_are_not_documents(tmp_path: Path):
    site = tmp_path
    files = {"omega/ok.py": "a = 1\n", "omega/blank.py": "\n\n", "omega/big.py": "#" * 1_000_001}
    add_distribution(site, "omega", files, "License: MIT")
    (site / "omega" / "latin1.py").write_bytes(b"x = '\xe9'\n")
    record = next(site.glob("omega-*.dist-info")) / "RECORD"
    record.write_text(record.read_text() + "omega/latin1.py,,\n")
    assert split_documents(find_packages([site])).train == ["a = 1\n"]
