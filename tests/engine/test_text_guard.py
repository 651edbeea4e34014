"""Free-text strings cannot loop on whitespace or escapes (issue 48): the schema a model is held to
bounds whitespace runs, enforced by llguidance (the engine vLLM's `guidance` backend and Outlines
use) with the embedded model's own tokenizer."""

from __future__ import annotations

import json

import pytest

from localfa.engine.grammar import TEXT_PATTERN, Grammar
from localfa.engine.vllm_types import structured_outputs

SCHEMA = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "maxLength": 200},
        "agent": {"enum": ["a  b", "c"]},
        "id": {"type": "string", "maxLength": 9, "pattern": "^[0-9]+$"},
        "quotes": {"type": "array", "items": {"type": "string", "maxLength": 80}},
    },
    "required": ["reason", "agent", "id", "quotes"],
}


def test_only_free_text_strings_are_guarded_and_answers_are_checked_against_the_plain_schema():
    g = Grammar.json(SCHEMA, name="guard-test")
    props = g.model_spec["properties"]
    assert props["reason"]["pattern"] == TEXT_PATTERN
    assert props["quotes"]["items"]["pattern"] == TEXT_PATTERN
    assert props["id"]["pattern"] == "^[0-9]+$" and props["agent"] == {"enum": ["a  b", "c"]}
    assert "pattern" not in g.spec["properties"]["reason"]  # parse() still checks the plain schema
    sent = structured_outputs(g)["json"]  # what vLLM is handed
    sent = sent if isinstance(sent, dict) else json.loads(sent)
    assert sent["properties"]["reason"]["pattern"] == TEXT_PATTERN


def test_the_pattern_admits_prose_and_indented_code_and_refuses_whitespace_runs():
    import regex

    ok = ["", "The fault is at step 3.", "line one\n\nline two", "def f():\n        return 1\n", "tab\tand\r\nCRLF"]
    bad = ["a\n\n\nb", "x" + " " * 33 + "y", "a\x00b", "\n\n\n\n\n\n"]
    assert all(regex.fullmatch(TEXT_PATTERN, s) for s in ok)
    assert not any(regex.fullmatch(TEXT_PATTERN, s) for s in bad)


@pytest.mark.real
def test_llguidance_with_the_embedded_tokenizer_stops_a_newline_loop_inside_the_string():
    import llguidance
    import llguidance.hf
    from transformers import AutoTokenizer

    from localfa.engine.model import embedded_model_dir

    tok = AutoTokenizer.from_pretrained(str(embedded_model_dir()))
    lltok = llguidance.hf.from_tokenizer(tok)
    g = Grammar.json(SCHEMA, name="guard-test")
    compiled = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(g.model_spec), defaults={"whitespace_flexible": False})

    def accepts(text: str) -> bool:
        matcher = llguidance.LLMatcher(lltok, compiled, log_level=0)
        return matcher.consume_tokens(tok.encode(text, add_special_tokens=False)) and not matcher.is_error()

    good = '{"reason":"step 3\\n\\nis wrong","agent":"c","id":"12","quotes":["    return x"]}'
    assert accepts(good) and g.parse(good)
    assert not accepts('{"reason":"step 3\\n\\n\\n')  # the loop is cut at the third line break
    assert not accepts('{"reason":"' + "\\t" * 33)
