"""FALAT: dependency-guided search for the decisive step of a failed run (see `method.py`)."""
