"""The baselines' named mutants (`localfa.oracle.mutants`): each prompt that shows trace text, with
that text removed and replaced by same-shape nonsense. Each is the only prompt of its stage that
shows the fault, so each must cost the p = 1 ceiling."""

from __future__ import annotations

from localfa.oracle.mutants import content_blind_mutants

ALL_AT_ONCE = content_blind_mutants({"baselines/all_at_once.j2": "p1"})
STEP_BY_STEP = content_blind_mutants({"baselines/step_by_step.j2": "p1"})
BINARY_SEARCH = content_blind_mutants({"baselines/binary_search.j2": "p1", "baselines/binary_search_final.j2": "p1"})
