"""A session's pickers as `warpcode chat` shows them: the agent's select config options (ACP `configOptions`: `mode`,
`model`, in the agent's order) and, from an agent without them, the older session modes (ACP says a client uses
config options when it gets them). Kept current from the session/new|load answers, config_option_update and
current_mode_update; a choice is given by value or by its number in the list chat printed.
"""

from __future__ import annotations

from typing import Any

from acp import schema


class SessionOptions:
    def __init__(self) -> None:
        self.selects: dict[str, schema.SessionConfigOptionSelect] = {}
        self.modes: schema.SessionModeState | None = None

    def opened(self, answer: Any) -> None:
        """The session/new, load or resume answer (all three carry `configOptions` and `modes`)."""
        self.modes = answer.modes
        self.configured(answer.config_options or [])

    def configured(self, options: list[Any]) -> None:
        """The full set of config options (config_option_update, or the set_config_option answer). Options of
        other types (a boolean, which this client does not advertise) are not shown, as ACP asks."""
        self.selects = {o.id: o for o in options if isinstance(o, schema.SessionConfigOptionSelect)}

    def mode_changed(self, mode_id: str) -> None:
        if self.modes is not None:
            self.modes = self.modes.model_copy(update={"current_mode_id": mode_id})

    def offers(self, option_id: str) -> bool:
        return option_id in self.selects or (option_id == "mode" and self.modes is not None)

    def current(self, option_id: str) -> str | None:
        if option_id in self.selects:
            return self.selects[option_id].current_value
        return self.modes.current_mode_id if option_id == "mode" and self.modes else None

    def choices(self, option_id: str) -> list[tuple[str, str, str]]:
        """(value, name, description) of each choice, groups flattened in their order."""
        if option_id in self.selects:
            values = []
            for entry in self.selects[option_id].options:
                values += entry.options if isinstance(entry, schema.SessionConfigSelectGroup) else [entry]
            return [(v.value, v.name, v.description or "") for v in values]
        if option_id == "mode" and self.modes:
            return [(m.id, m.name, m.description or "") for m in self.modes.available_modes]
        return []

    def listing(self, option_id: str) -> str:
        current = self.current(option_id)
        lines = []
        for number, (value, name, description) in enumerate(self.choices(option_id), 1):
            mark = "*" if value == current else " "
            label = value if name == value else f"{value} ({name})"
            lines.append(f" {mark}{number:>2}. {label}{'  ' + description if description else ''}")
        return "\n".join(lines)

    def pick(self, option_id: str, answer: str) -> str:
        """The value `answer` names (a value, or the number of one in the listing), or a one-line error."""
        values = [value for value, _, _ in self.choices(option_id)]
        if answer in values:
            return answer
        if answer.isdigit() and 1 <= int(answer) <= len(values):
            return values[int(answer) - 1]
        raise ValueError(f"no {option_id} {answer!r}: choose one of {', '.join(values)} (or its number)")

    def summary(self) -> str:
        """`mode ask, model X`: each picker's current value, in the agent's order."""
        ids = list(self.selects) or (["mode"] if self.modes else [])
        return ", ".join(f"{self.name(i)} {self.current(i)}" for i in ids)

    def name(self, option_id: str) -> str:
        return option_id if option_id in ("mode", "model") else self.selects[option_id].name
