"""kite harness: build the engine and its CUDA module, run pre-registered criteria, report."""

__version__ = "0.1.0"
