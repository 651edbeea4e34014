"""Verbatim evidence: a quote is in the trace as a person reads it (wraps, escapes, apostrophes)."""

from __future__ import annotations

from localfa.methods.evidence import clean_quote, extract_quotes, quoted_evidence, unescape, verify_quotes
from localfa.traces.lineview import LineView
from localfa.traces.model import Step, Trace

CONTENT = (
    'The agent\'s answer was "User:Darwin" because it said: I know that the only dinosaur article\n'
    "is the T. rex one. " + "https://example.org/" + "abcdefghij" * 12 + " end of the story."
)


def trace(content: str = CONTENT, **extra) -> Trace:
    steps = [
        Step(index=0, agent="Planner", role="assistant", content="Plan: search Wikipedia first."),
        Step(index=1, agent="Surfer", role="assistant", content=content, **extra),
    ]
    return Trace(id="e", source="e.json", format="messages", subset=None, task="Who nominated it?", agents=[], steps=steps)


def wrapped_lines(t: Trace, width: int = 60) -> list[str]:
    view = LineView(t, width=width)
    return view.lines[view.line_of_step(1) :]


def test_a_quote_across_a_line_wrap_is_verbatim_however_the_lines_are_joined():
    lines = wrapped_lines(trace())
    i = next(k for k, ln in enumerate(lines) if "the only" in ln)
    assert "dinosaur" not in lines[i] or "T. rex" not in lines[i]  # the quote below really crosses a wrap
    joined_space = lines[i].rstrip()[-20:] + " " + lines[i + 1][:20]
    joined_newline = lines[i].rstrip()[-20:] + "\n" + lines[i + 1][:20]
    url = next(k for k, ln in enumerate(lines) if "abcdefghij" in ln)
    mid_word = lines[url][-15:] + " " + lines[url + 1][:15]  # a wrap inside one long word
    assert verify_quotes(trace(), [joined_space, joined_newline, mid_word]) == [True, True, True]


def test_json_escapes_are_undone_and_inner_quotes_are_found():
    quotes = [
        'answer was "User:Darwin" because',  # as a person reads the content
        'answer was \\"User:Darwin\\" because',  # as the numbered view shows it
        "only dinosaur article\\nis the T. rex one",  # an escaped newline copied from the view
        "The agent's answer was",  # an apostrophe
        '"User:Darwin"',
    ]
    assert verify_quotes(trace(), quotes) == [True] * 5


def test_line_labels_and_ellipses_copied_into_a_quote_are_not_part_of_it():
    assert clean_quote("...  12 (step 1)| the only dinosaur article…") == "the only dinosaur article"
    assert verify_quotes(trace(), ["... the only dinosaur article\n  13 (step 1)| is the T. rex one ..."]) == [True]


def test_different_words_are_not_verbatim():
    assert verify_quotes(trace(), ["The agent's answer was FunkMonk", "the only dinosaur articles", "", "   "]) == [
        False,
        False,
        False,
        False,
    ]


def test_tool_call_arguments_and_observations_count():
    t = trace(
        "calling the tool",
        tool_calls=[{"name": "search", "arguments": {"query": 'say "hi" twice'}}],
        observation="No results for the query.",
    )
    assert verify_quotes(t, ['say "hi" twice', 'say \\"hi\\" twice', "No results for the query"]) == [True] * 3


def test_unescape():
    assert unescape('a \\"b\\" \\n c \\u00e9 \\\\ d') == 'a "b" \n c é \\ d'
    assert unescape("no escapes") == "no escapes"


def test_extract_quotes_keeps_apostrophes_and_inner_quotes():
    text = (
        "He wrote 'the agent's answer was final' and \"he said \"no\" twice today\" but the agents' "
        "files were 'short'. Also \u201ccurly quoted text here\u201d."
    )
    assert extract_quotes(text) == ["the agent's answer was final", 'he said "no" twice today', "curly quoted text here"]


def test_quoted_evidence_takes_the_longest_span_that_is_verbatim():
    reasoning = (
        'Step 1 said \'The agent\'s answer was "User:Darwin" because\' and "answer was "User:Darwin"", not \'something nobody ever wrote\'.'
    )
    assert quoted_evidence(trace(), reasoning) == ['The agent\'s answer was "User:Darwin" because', 'answer was "User:Darwin"']
