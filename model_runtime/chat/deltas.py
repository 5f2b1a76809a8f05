"""The pieces a model's streamed answer is split into before tool calls are read: answer text and reasoning.
The reasoning splitter yields both; the tool-call parsers read the text and pass the thoughts through."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TextDelta:
    text: str


@dataclass
class ThoughtDelta:
    text: str
