"""warpcode.agent.cli: the `warpcode` command line: the parser and `main` (main.py), one module per command, the
terminal view, the chat client and the configuration (config file, environment, options)."""

# The console script's entry point, `warpcode.agent.cli:main`. (This name is the function: import from the module
# warpcode.agent.cli.main by name, `from warpcode.agent.cli.main import build_parser`.)
from warpcode.agent.cli.main import main

__all__ = ["main"]
