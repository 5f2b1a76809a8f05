"""The slash commands `warpcode chat` knows: its own, run here, and the agent's (ACP `available_commands_update`),
which chat sends to the agent as the prompt typed, since ACP runs a command as a prompt whose text begins with
`/name`. A command of chat's own wins over an agent command of the same name (the agent's `/undo` does what
chat's does; chat's `/mode` and `/model` are pickers over the session's config options, and leave it to the
agent's command of that name only when the agent sends no such option). A unique beginning of a
name is enough (`/chec` is `/checkpoints`): the line-based prompt has no Tab completion, so this is its completion.
"""

from __future__ import annotations

from acp import schema

CHAT_COMMANDS = {  # name: (argument hint, what it does)
    "undo": ("", "restore the newest checkpoint (the files as they were before the last turn's edits)"),
    "checkpoints": ("", "list the checkpoints, newest first"),
    "mode": ("[MODE | N]", "list the permission modes, or switch to one (by name or number)"),
    "model": ("[MODEL | N]", "list the models the agent offers, or switch to one (by name or number)"),
    "help": ("", "this text"),
    "quit": ("", "leave (also /exit, Ctrl-D, or Ctrl-C at the prompt); Ctrl-C during a turn cancels the turn"),
}
ALIASES = {"exit": "quit"}


class UnknownCommand(ValueError):
    """A slash command neither chat nor the agent has: the message says what to type instead."""


class SlashCommands:
    def __init__(self) -> None:
        self.agent: dict[str, schema.AvailableCommand] = {}  # as the agent last advertised them

    def advertised(self, commands: list[schema.AvailableCommand]) -> None:
        """An available_commands_update: the full list, replacing the one before."""
        self.agent = {command.name: command for command in commands}

    def resolve(self, word: str) -> tuple[str, bool]:
        """The command `word` (`/name`, or a unique beginning of one) names, and whether chat runs it itself."""
        name = word.removeprefix("/")
        name = ALIASES.get(name, name)
        if name in CHAT_COMMANDS or name in self.agent:
            return name, name in CHAT_COMMANDS
        matches = sorted(n for n in {*CHAT_COMMANDS, *self.agent} if n.startswith(name)) if name else []
        if len(matches) == 1:
            return matches[0], matches[0] in CHAT_COMMANDS
        if matches:
            raise UnknownCommand(f"{word} could be {', '.join('/' + m for m in matches)}: type more of the name")
        raise UnknownCommand(f"unknown command {word!r}: /help lists the commands")

    def help(self) -> str:
        lines = ["Type a request for the agent, or a command:"]
        lines += _rows((name, hint, text) for name, (hint, text) in CHAT_COMMANDS.items())
        agents = [command for name, command in self.agent.items() if name not in CHAT_COMMANDS]  # agent's order
        if agents:
            lines.append("The agent's commands (sent to it as the prompt, with what follows the name):")
            lines += _rows((c.name, f"<{c.input.root.hint}>" if c.input else "", c.description) for c in agents)
        return "\n".join(lines)


def _rows(rows) -> list[str]:
    rows = [(f"/{name} {hint}".rstrip(), text) for name, hint, text in rows]
    width = max(len(left) for left, _ in rows)
    return [f"  {left.ljust(width)}  {text}" for left, text in rows]
