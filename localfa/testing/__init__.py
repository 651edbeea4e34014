"""Helpers for tests and benchmarks only (fault injection); nothing here is used by a normal run."""
