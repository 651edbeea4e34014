"""DRIFT: claim-centric auditing of a failed run (claim ledger, support checks, dependency tracer)."""
