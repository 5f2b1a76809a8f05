import os

import torch

# Triton decides at import whether kernels compile or run in its CPU interpreter: decide before any test module
# imports warpcode.kernels (as tests/conftest.py does for the default test run).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
