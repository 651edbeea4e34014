"""The package's version, in a module of its own so that the run manifest can record it without
importing the package's lazy API (`localfa/__init__.py`)."""

__version__ = "0.1.0"
