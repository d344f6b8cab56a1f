"""``python -m harness.models ...``: the same commands as ``python -m harness models ...``."""

import argparse
import sys

from . import cli

p = argparse.ArgumentParser(prog="python -m harness.models", description=cli.DESCRIPTION)
cli.add_arguments(p)
sys.exit(cli.run(p.parse_args()))
