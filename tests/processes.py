"""Processes as the tests look at them from outside."""

from pathlib import Path


def process_running(pid: int) -> bool:
    """Alive and not a zombie (a zombie no init reaps still answers kill(pid, 0))."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
