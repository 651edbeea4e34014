"""Evidence marking: quotes are found where a person would find them and wrapped in <mark>."""

from __future__ import annotations

from localfa.view.marks import find_quotes, fold_with_map, marked_html, merge_ranges


def test_fold_map_points_back_to_the_original():
    original = "  a\n\n  b c  "
    f = fold_with_map(original)
    assert f.text == "a b c"
    assert original[f.start[1] : f.end[1]] == "\n\n  "  # the folded space covers the whole run
    assert original[f.start[2] : f.end[2]] == "b"


def test_quote_across_a_line_break_is_marked_in_the_original_text():
    text = "The ABS page says: Greater\n   Sydney, 2021 Census, people: 5,231,147."
    ((a, b, q),) = find_quotes(text, ["Greater Sydney, 2021 Census"])
    assert (q, text[a:b]) == (0, "Greater\n   Sydney, 2021 Census")


def test_escaped_and_line_view_decorated_quotes_are_found():
    text = 'He said "no" twice.'
    assert [text[a:b] for a, b, _ in find_quotes(text, ['He said \\"no\\" twice'])] == ['He said "no" twice']
    assert [text[a:b] for a, b, _ in find_quotes(text, ["  12 (step 3)| He said"])] == ["He said"]


def test_every_occurrence_is_marked_and_a_missing_quote_is_not():
    text = "retry, then retry again"
    assert [(a, b) for a, b, _ in find_quotes(text, ["retry", "nowhere to be seen"])] == [(0, 5), (12, 17)]


def test_overlapping_quotes_merge_and_html_is_escaped():
    text = "<b>x</b> and y"
    ranges = find_quotes(text, ["<b>x</b> and", "and y"])
    assert merge_ranges(ranges) == [(0, 14, 0)]
    out = marked_html(text, ranges)
    assert out == '<mark class="ev" data-quote="0">&lt;b&gt;x&lt;/b&gt; and y</mark>'
    assert marked_html("a<b", []) == "a&lt;b"
