"""`local:DIR#mxfp8` (and a bare `DIR#mxfp8`): the checkpoint served with MXFP8 weights; the process's shared
engines are per checkpoint and weight format."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpcode.agent.backends import BackendError, Finish, backend_from_spec
from warpcode.agent.backends.local import split_local_spec
from warpcode.model_runtime.chat.messages import Message


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from tests.model_runtime.checkpoints import save_chat_checkpoint, train_bpe

    return save_chat_checkpoint(tmp_path_factory.mktemp("chat"), train_bpe())


def test_specs_name_the_weight_format(checkpoint: Path, tmp_path: Path) -> None:
    assert split_local_spec(str(checkpoint)) == (str(checkpoint), "bf16", None, True, None)
    assert split_local_spec(f"{checkpoint}#mxfp8") == (str(checkpoint), "mxfp8", None, True, None)
    odd = tmp_path / "run#2"
    odd.mkdir()
    assert split_local_spec(str(odd)) == (
        str(odd),
        "bf16",
        None,
        True,
        None,
    )  # a '#' inside a directory's name stays
    for spec in (f"local:{checkpoint}#mxfp8", f"{checkpoint}#mxfp8"):
        backend = backend_from_spec(spec)
        assert (backend.path, backend.weights) == (checkpoint, "mxfp8")
    assert backend_from_spec(f"local:{checkpoint}").weights == "bf16"
    with pytest.raises(BackendError, match=r"unknown option #int4 in .*: use a weight format \(#bf16, #mxfp8\)"):
        backend_from_spec(f"local:{checkpoint}#int4")


async def test_bf16_and_mxfp8_engines_of_one_checkpoint_are_two(checkpoint: Path) -> None:
    from warpcode.kernels import MXTensor

    backends = [backend_from_spec(spec) for spec in (f"local:{checkpoint}#mxfp8", f"{checkpoint}#mxfp8",
                                                    f"local:{checkpoint}")]  # fmt: skip
    for backend in backends:
        backend.max_new_tokens = 3
        events = [e async for e in backend.stream([Message("system", "s"), Message("user", "hi")], [])]
        assert isinstance(events[-1], Finish) and 1 <= events[-1].output_tokens <= 3
    mx, same, plain = (backend._engine for backend in backends)
    assert mx is same and mx is not plain
    assert isinstance(mx.model.model.layers[0].mlp.experts.w13, MXTensor)
    assert not isinstance(plain.model.model.layers[0].mlp.experts.w13, MXTensor)
