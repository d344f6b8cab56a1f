"""Exceptions with a user-facing message (never shown as a traceback)."""

from __future__ import annotations


class HarnessError(Exception):
    """A usage or configuration problem: message printed, exit status 2."""


class ConfigError(HarnessError):
    """configs/engine.yaml is missing or malformed."""


class SchemaErrors(HarnessError):
    """One or more criteria files do not validate; each entry is one formatted message."""

    def __init__(self, messages: list[str]):
        self.messages = messages
        super().__init__("\n".join(messages))
