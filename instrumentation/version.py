"""The version of tracefix, in a module of its own so the modules `tracefix/__init__` imports can
read it without importing the package back."""

__version__ = "0.1.0"
