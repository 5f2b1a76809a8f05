"""The `warpcode` command line.

Each subcommand lives in its own module and registers itself here once it works; its heavy imports (torch,
triton) happen inside its handler so `warpcode --help` and the service start fast.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from warpcode.agent.backends import BackendError
from warpcode.agent.cli import acp, batch, bench, chat, generate, run, serve, serve_model, sessions
from warpcode.tools.errors import ToolError

# The errors raised on purpose, whose message is written for the user: shown without their class name.
_SAYS_IT_ALL = (ValueError, OSError, RuntimeError, ToolError, BackendError)


def _version() -> str:
    try:
        return metadata.version("warpcode")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: run `pip install -e .`)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="warpcode",
        description="Coding-agent IDE backend with a local Mixture-of-Experts runtime.",
    )
    parser.add_argument("--version", action="version", version=f"warpcode {_version()}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    acp.register(commands)
    batch.register(commands)
    bench.register(commands)
    chat.register(commands)
    generate.register(commands)
    run.register(commands)
    serve.register(commands)
    serve_model.register(commands)
    sessions.register(commands)
    _accept_debug_after_commands(parser)
    return parser


def _accept_debug_after_commands(parser: argparse.ArgumentParser) -> None:
    """`--debug` also after a (sub)command (`warpcode run ... --debug`), as every error message suggests it."""
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        for command in action.choices.values():
            command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            _accept_debug_after_commands(command)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if args.debug:
            raise
        print(f"warpcode {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return 1


def _one_line(error: BaseException) -> str:
    message = str(error).strip()
    protocol = sys.modules.get("acp.exceptions")  # loaded only by the commands that speak ACP, and slow to load
    said_on_purpose = _SAYS_IT_ALL + ((protocol.RequestError,) if protocol else ())
    if not isinstance(error, said_on_purpose) or not message:
        # Not an error we raise on purpose (a bug, most likely): its class is part of what the user should report.
        message = f"{type(error).__name__}: {message}".rstrip(": ")
    return " ".join(message.split()) + "  (run with --debug for the traceback)"


if __name__ == "__main__":
    sys.exit(main())
