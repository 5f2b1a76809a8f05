"""The install layout: one `warpcode` namespace, nothing generic at top level, a torch-free service side."""

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {
    "agent": "warpcode.agent",
    "tools": "warpcode.tools",
    "kernels": "warpcode.kernels",
    "model_runtime": "warpcode.model_runtime",
    "bench": "warpcode.bench",
    "training": "warpcode.training",
}


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_subpackage_is_listed_for_regular_installs():
    listed = set(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join([FOLDERS[folder], *init.parent.relative_to(REPO_ROOT / folder).parts])
        for folder in FOLDERS
        for init in (REPO_ROOT / folder).rglob("__init__.py")
    }
    assert on_disk == listed


@pytest.mark.slow
def test_namespace_imports_from_outside_the_repo(tmp_path):
    modules = ", ".join(FOLDERS.values())
    result = run_python(f"import {modules}", tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["tools", "kernels", "agent", "model_runtime", "bench", "training"])
def test_generic_names_are_not_importable_top_level(tmp_path, name):
    # Another distribution may own the name (transformers depends on Hugging Face's `kernels`): ours must not.
    code = (
        f"import importlib.util; spec = importlib.util.find_spec({name!r}); "
        "print(*(spec.submodule_search_locations or [spec.origin]) if spec else [], sep='\\n')"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    ours = [line for line in result.stdout.splitlines() if line and Path(line).resolve() == REPO_ROOT / name]
    assert not ours, f"a top-level {name!r} package from this repository is importable: {ours}"


def test_service_side_does_not_import_torch(tmp_path):
    code = "import sys, warpcode.agent, warpcode.agent.cli, warpcode.tools; sys.exit('torch' in sys.modules)"
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr or "importing warpcode.agent / warpcode.tools imported torch"


@pytest.mark.slow
def test_regular_wheel_holds_only_the_warpcode_namespace(tmp_path):
    source = tmp_path / "source"  # setuptools writes build/ into the tree it builds: not into the checkout
    for folder in FOLDERS:
        shutil.copytree(REPO_ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)]
    subprocess.run([*build, str(source)], check=True, capture_output=True, timeout=300)
    [wheel] = tmp_path.glob("warpcode-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"warpcode", wheel.name.split("-py")[0] + ".dist-info"}, top_level
    for folder, package in FOLDERS.items():
        assert f"{package.replace('.', '/')}/__init__.py" in names, f"{folder}/ missing from the wheel"
    assert "warpcode/kernels/configs/NVIDIA_H200.json" in names, "the measured kernel configs must ship"
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json"):  # fmt: skip
        assert f"warpcode/model_runtime/builtin/{name}" in names, f"the built-in model's {name} must ship"


def test_the_service_installs_without_torch_and_the_readme_says_how_to_get_the_cpu_build():
    """The bare package (the service, no runtime extra) pulls no PyTorch or CUDA wheels; the main command and the
    test command take torch from PyTorch's CPU index, since PyPI's Linux torch is the CUDA build."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    heavy = [dep for dep in project["dependencies"] if dep.split(">")[0].split("=")[0].strip() in ("torch", "triton")]
    assert heavy == [] and not any(dep.startswith("nvidia") for dep in project["dependencies"])
    readme = (REPO_ROOT / "README.md").read_text()
    main_job, test_run = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")][:2]
    cpu_torch = "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    # the main job: the runtime with the CPU build, the built-in model answering with nothing configured, the service
    assert cpu_torch in main_job and "pip install -e '.[runtime]'" in main_job and "--model" not in main_job
    assert "warpcode run --cwd" in main_job and main_job.endswith("; warpcode serve")
    assert cpu_torch in test_run
    pytest_command = "pytest -n auto"  # what .ci/run runs
    assert test_run.endswith(f"&& {pytest_command} && (cd editors/vscode && npm ci && npm test)")
    assert f"\n{pytest_command}\n" in (REPO_ROOT / ".ci" / "run").read_text()


def test_the_command_line_loads_only_what_it_runs(tmp_path):
    """`warpcode bench` runs on the GPU machines, whose image has torch and triton but none of the agent service's
    libraries: importing the command line must not pull them in (each command imports its own when it runs)."""
    service_only = ["git", "tree_sitter", "websockets", "acp", "pydantic", "httpx", "jinja2", "torch"]
    code = f"import sys, warpcode.agent.cli; print([m for m in {service_only!r} if m in sys.modules])"
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_no_exported_tool_name_is_also_a_module_of_the_package():
    """warpcode.tools loads its names lazily; a submodule of the same name as a function would replace it as the
    package's attribute once imported (`tools.search` became a module, and every search call failed)."""
    import warpcode.tools

    modules = {path.stem for path in (REPO_ROOT / "tools").glob("*.py")}
    assert set(warpcode.tools.__all__) & modules == set()
