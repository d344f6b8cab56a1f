"""Exceptions with a user-facing message (never shown as a traceback)."""

from __future__ import annotations


class HarnessError(Exception):
    """A usage or configuration problem: message printed, exit status 2."""


class SchemaErrors(HarnessError):
    """A file the user writes does not validate; each entry is one `FILE:LINE: PATH: message`."""

    def __init__(self, messages: list[str] | str):
        self.messages = [messages] if isinstance(messages, str) else list(messages)
        super().__init__("\n".join(self.messages))


class ConfigError(SchemaErrors):
    """configs/engine.yaml is missing or does not validate."""
