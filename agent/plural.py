"""Counts in messages: "1 job", "2 jobs", "0 jobs"."""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
