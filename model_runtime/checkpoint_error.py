"""The one error type of checkpoint loading (weights.py, fp8_checkpoint.py)."""


class CheckpointError(ValueError):
    """The checkpoint does not match the model its config.json describes, or a file is unreadable."""
