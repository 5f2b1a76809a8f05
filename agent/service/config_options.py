"""A session's configuration as ACP offers it: the permission mode and the model.

Both are `select` config options (ACP `configOptions`, in session/new, load and resume answers, set with
session/set_config_option, announced with `config_option_update`). The mode is also offered through the older
modes API (`modes`, session/set_mode, `current_mode_update`), which clients without config options still use: the
two always show the same mode. The model's values are the backend specs the service was configured with (the
default first); an option's value is the spec itself, so nothing maps names back to specs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from acp import schema

MODE_DESCRIPTIONS = {
    "ask": ("Ask", "Edits, commands and tests ask for permission."),
    "accept-edits": ("Accept edits", "Edits apply without asking; commands and tests ask."),
    "auto": ("Auto", "Nothing asks for permission."),
}


def session_modes(current: str) -> schema.SessionModeState:
    available = [schema.SessionMode(id=m, name=n, description=d) for m, (n, d) in MODE_DESCRIPTIONS.items()]
    return schema.SessionModeState(current_mode_id=current, available_modes=available)


def config_options(mode: str, model: str | None, models: Sequence[str]) -> list[schema.SessionConfigOptionSelect]:
    """The session's whole configuration state, in the order a client should show it; no model option when the
    service has no model configured (there is nothing to choose)."""
    modes = [
        schema.SessionConfigSelectOption(value=m, name=n, description=d) for m, (n, d) in MODE_DESCRIPTIONS.items()
    ]
    options = [_select("mode", "Mode", "What the agent may do without asking for permission.", mode, modes)]
    if models and model is not None:
        choices = [
            schema.SessionConfigSelectOption(value=spec, name=model_name(spec), description=spec) for spec in models
        ]
        about = "The model that answers; a change applies from the session's next model request."
        options.append(_select("model", "Model", about, model, choices))
    return options


def _select(
    option_id: str, name: str, description: str, current: str, choices: list[schema.SessionConfigSelectOption]
) -> schema.SessionConfigOptionSelect:
    return schema.SessionConfigOptionSelect(
        id=option_id,
        name=name,
        description=description,
        category=option_id,  # ACP's reserved categories are "mode" and "model": ours are exactly those
        type="select",
        current_value=current,
        options=choices,
    )


def model_name(spec: str) -> str:
    """A short name for a backend spec: the served model's name, else the checkpoint's or script's file name."""
    kind, sep, rest = spec.partition(":")
    if sep and kind == "openai":
        url, _, served = rest.partition("#")
        return served or url
    path = rest if sep and kind in ("local", "scripted") else spec
    return Path(path.split("#")[0]).name or spec
