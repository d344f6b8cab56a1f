"""``python -m harness.models ...``: the same commands as ``python -m harness models ...``."""

import argparse
import sys

from harness import console

from . import cli

p = argparse.ArgumentParser(prog="python -m harness.models", description=cli.DESCRIPTION)
cli.add_arguments(p)
with console.guarded():  # a closed pipe on the console never changes the exit status
    rc = cli.run(p.parse_args())
sys.exit(rc)
