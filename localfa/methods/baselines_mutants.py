"""The baselines' named mutants (`localfa.oracle.mutants`): each prompt that shows trace text, with
that text removed and replaced by same-shape nonsense. Each is the only prompt of its stage that
shows the fault, so each must cost the p = 1 ceiling."""

from __future__ import annotations

from localfa.oracle.mutants import content_blind_mutants

ALL_AT_ONCE = content_blind_mutants({"baselines/all_at_once.j2": "p1"})
STEP_BY_STEP = content_blind_mutants({"baselines/step_by_step.j2": "p1"})
# The final call is reached only where the halving ends on two steps (on the intact run, calls = rounds
# + 1), and a blind pick between two is right half the time: its mutants run on the first four
# dev traces of each subset, by id, that end so.
FINAL_CALL_TRACES = tuple(f"algorithm-generated/{n}" for n in (2, 4, 5, 6)) + tuple(f"hand-crafted/{n}" for n in (1, 2, 4, 6))
BINARY_SEARCH = content_blind_mutants({"baselines/binary_search.j2": "p1"}) + content_blind_mutants(
    {"baselines/binary_search_final.j2": "p1"}, traces=FINAL_CALL_TRACES
)
