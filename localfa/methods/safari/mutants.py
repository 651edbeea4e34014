"""SAFARI's named mutants (`localfa.oracle.mutants`): one break per stage or rule, each of which
the oracle that cannot read the answer key must notice.

The tool results (`safari/observation.j2`: every read and search result, the bootstrap read
included) are the only prompt that shows trace text, so its two content-blind mutants (text
removed, text made same-shape nonsense) and the named "empty-results" case (every read and search
returns nothing at all) must each cost the p = 1 ceiling.
"""

from __future__ import annotations

import re
from typing import Any

from localfa.engine.types import Message
from localfa.methods.safari import investigator
from localfa.methods.safari.history import History
from localfa.methods.safari.investigator import Investigation
from localfa.oracle.mutants import Mutant, content_blind_mutants, patched
from localfa.traces.lineview import LineView, SearchResult, Shown

# The dev traces the CI test runs the mutants that matter only where the run is not shown whole
# on: the dev traces SAFARI does not see whole at the oracle's 32k window (whole_run_shown false:
# hand-crafted 2, 3, 8, 9, 11, 15, 19, 20; the other 52 are read whole at turn 0, where no search
# or read plan can matter), less those whose fault's words are not its own (11 and 20: a
# non-distinctive fingerprint, recognised at the first step that repeats them, so the intact
# method misses there too and nothing could be killed).
UNFIT_TRACES = tuple(f"hand-crafted/{n}" for n in (2, 3, 8, 9, 15, 19))
# The dev traces the CI test grows into long runs for the `long` mutants: the first three of each
# folder (the set issue 36's long-run figures were first measured on; chosen before any kill).
LONG_TRACES = tuple(f"{folder}/{n}" for folder in ("algorithm-generated", "hand-crafted") for n in (1, 2, 3))


def _empty(self: LineView, *args: Any, **kwargs: Any) -> Shown:
    return Shown("")


def _read_shows_nothing(self: LineView, offset: int, limit: int) -> Shown:
    return Shown(f"[shown lines {offset}-{offset + limit - 1}]")


_search_hits = LineView.search_hits


def _search_literal_only(
    self: LineView, pattern: str, max_results: int = 50, timeout_s: float = 1.0, from_end: bool = False
) -> SearchResult:
    if re.fullmatch(r'"step_id": \d+,?', str(pattern)):
        return _search_hits(self, pattern, max_results, timeout_s, from_end)
    return SearchResult(pattern=str(pattern))


_evaluator_messages = investigator.evaluator_messages


def _evaluator_blind(reasoning: str, question: str, limits: Any) -> list[Message]:
    return _evaluator_messages("", question, limits)


# The rubric the evaluator had before issue 53.4: it rewards a well-argued claim, not a decisive mistake.
_INVENTED_RUBRIC = (
    "You check one claim made by an investigator of a failed multi-agent run. You cannot see the run: judge "
    "the investigator's reasoning and the evidence it quotes. Score how well the claim is supported: evidence "
    "quoted, specific and consistent with the reasoning, 80-100; partly supported, 40-70; vague or nothing "
    'quoted, 0-30. Answer with one JSON object: "feedback" first, then "score" (0 to 100).'
)


def _evaluator_invented_rubric(reasoning: str, question: str, limits: Any) -> list[Message]:
    messages = _evaluator_messages(reasoning, question, limits)
    return [{"role": "system", "content": _INVENTED_RUBRIC}, *messages[1:]]


def _first_line_only(self: Investigation) -> dict[str, Any]:
    return {"name": "read", "offset": 0, "limit": 1}


MUTANTS = content_blind_mutants({"safari/observation.j2": "p1"}) + [
    Mutant(
        "empty-results",
        "read and search: every result comes back empty",
        "p1",
        patched((LineView, "read_shown", _empty), (LineView, "search_shown", _empty)),
    ),
    Mutant("read_shows_no_lines", "read: its lines never reach the model", "p1", patched((LineView, "read_shown", _read_shows_nothing))),
    Mutant(
        "evaluator_without_reasoning",
        "evaluate: the evaluator never sees the reasoning",
        "cost",
        patched((investigator, "evaluator_messages", _evaluator_blind)),
    ),
    Mutant(
        "search_literal_step_id_only",
        'search: only a literal "step_id": N matches',
        "p1",
        patched((LineView, "search_hits", _search_literal_only)),
        traces=UNFIT_TRACES,
    ),
    Mutant(
        "no_bootstrap_read",
        "bootstrap read: neither the whole run nor its end is shown first",
        "cost",
        patched((Investigation, "_whole_run", lambda self, room: None), (Investigation, "_bootstrap_read", _first_line_only)),
    ),
    Mutant(
        "busywork_when_shown_whole",
        "RULE 5 minimum: demanded even when the whole run was shown",
        "cost",
        patched((Investigation, "evaluate_open", property(lambda self: self.investigated >= self.min_investigate))),
    ),
    # `stub_summaries` (a summarised result keeps nothing) is not registered: the oracle does not
    # notice it (docs/methods/safari.md, "Issue 53's two variants").
    Mutant(
        "invented_rubric",
        "evaluator: the rubric rewards quoted, specific, consistent evidence, not the paper's three conditions",
        "p07",
        patched((investigator, "evaluator_messages", _evaluator_invented_rubric)),
    ),
    Mutant("threshold_zero", "evaluate threshold θ=70: every evaluation passes", "p07", spec="threshold=0"),
    Mutant("threshold_unreachable", "evaluate threshold θ=70: no evaluation passes", "cost", spec="threshold=100"),
    # Stages that earn their place only under context pressure: on runs shown whole no rule
    # kills them; on the same runs grown past the window (2x and 5x) both must lose the fault.
    Mutant(
        "no_result_summaries",
        "context: older results are never summarised, whole turns are evicted instead",
        "long",
        patched((History, "summarise_oldest", lambda self: False)),
        traces=LONG_TRACES,
        long=True,
    ),
    Mutant("no_stm", "short-term memory: none", "long", spec="use_stm=false", traces=LONG_TRACES, long=True),
]
