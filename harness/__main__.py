"""`python -m harness ...` and the `kite-harness` command. Importing the harness takes a second or
more (numpy, scipy); a Ctrl-C in that time ends with one line and status 130, never a traceback."""

import os
import signal
import sys


def _interrupted_while_starting(signum: int, frame: object) -> None:
    os.write(2, b"harness: error: interrupted\n")
    os._exit(128 + signum)  # nothing has started yet: no report, no child to end


signal.signal(signal.SIGINT, _interrupted_while_starting)
from harness.cli import main  # noqa: E402 - after the handler: this import is the slow part

signal.signal(signal.SIGINT, signal.default_int_handler)


def entry() -> int:
    return main()


if __name__ == "__main__":
    sys.exit(entry())
