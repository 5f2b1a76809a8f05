"""`warpcode serve`'s start-up line on stderr, which says where it listens: the CLI prints it, scripts and tests
read the URL from it. A module of its own, so that reading it loads nothing of the service."""

from __future__ import annotations

LISTENING = "warpcode serve: ACP on"  # `warpcode serve`'s start-up line on stderr, before the URL


def listening_url(stderr_line: str) -> str | None:
    """The ws:// URL from `warpcode serve`'s start-up line (scripts and tests read it), None for any other line."""
    if not stderr_line.startswith(LISTENING):
        return None
    return stderr_line[len(LISTENING) :].split()[0]
