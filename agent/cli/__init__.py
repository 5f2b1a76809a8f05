"""warpcode.agent.cli: the `warpcode` command line: the parser and `main` (main.py), one module per command, the
options the agent commands share (options.py), the terminal view and the chat client. A leaf: nothing outside it
imports it (the user's settings are warpcode.agent.config, the headless agent warpcode.agent.headless)."""

# The console script's entry point, `warpcode.agent.cli:main`. (This name is the function: import from the module
# warpcode.agent.cli.main by name, `from warpcode.agent.cli.main import build_parser`.)
from warpcode.agent.cli.main import main

__all__ = ["main"]
