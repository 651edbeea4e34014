"""Benign steps in a run's own style, for lengthening labelled runs (`localfa.traces.longruns`).

A long run built from a short labelled one needs many steps that did no harm and that a reader,
human or model, cannot pick out at a glance. Each agent of the run gets a `Voice`: its name, role
and kind, the first lines its real steps open with, how long they are, and the paragraphs it
wrote before the fault. A filler step is that agent's opening line (numbers redrawn) followed by
paragraphs mixed from its own earlier paragraphs (numbers redrawn) and from generators of the
same kind (tool output for a terminal, page text for a browser, reasoning with plans and code for
the others), over the run's own vocabulary. Nothing generated may share an eight-word run with
the fault steps (`FaultText`), so the fault's text appears only where the label says it is.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Literal

from localfa.traces.model import normalize_agent

_WORD = re.compile(r"[A-Za-z][A-Za-z_-]{3,17}")
_DIGITS = re.compile(r"\d+")
_READABLE = re.compile(r"(?=.*[aeiouy])[a-z]{4,12}")  # a word, not an id or a hash
_TOOL_NAMES = re.compile(r"terminal|computer|tool|execut|shell|console|python|interpreter", re.IGNORECASE)
_WEB_NAMES = re.compile(r"surfer|browser|web|search|navigat", re.IGNORECASE)
SHINGLE = 8  # words: a generated paragraph may share no run this long with the fault steps
_STOP = frozenset(
    "this that with from have were will would could should their there then than they them what when which while "
    "into onto about after before other these those only also just more most some such very your yours been being "
    "here where because each does done make made over under need needs please provide following information".split()
)
_FALLBACK_VOCAB = (
    "record entry value column source result summary report index dataset table query response archive listing "
    "version schedule section document reference count total average filter detail field status update"
)


@dataclass(frozen=True)
class FaultText:
    """The word shingles of the fault steps: a paragraph sharing one is never used as filler."""

    shingles: frozenset[int]

    @classmethod
    def of(cls, texts: Iterable[str]) -> "FaultText":
        found: set[int] = set()
        for text in texts:
            found.update(_shingles(text))
        return cls(frozenset(found))

    def touches(self, text: str) -> bool:
        return bool(self.shingles) and any(h in self.shingles for h in _shingles(text))


def _shingles(text: str) -> Iterable[int]:
    words = text.lower().split()
    return (hash(tuple(words[i : i + SHINGLE])) for i in range(max(0, len(words) - SHINGLE + 1)))


@dataclass
class Voice:
    """How one agent of the run writes: enough to make more steps that read like its own."""

    agent: str
    role: str
    kind: Literal["action", "observation"]
    name: str | None
    style: str  # "tool" | "web" | "prose"
    openers: list[str] = field(default_factory=list)  # first lines of its real steps
    paragraphs: list[str] = field(default_factory=list)  # benign paragraphs it wrote
    sizes: list[int] = field(default_factory=list)  # characters of its real steps


def style_of(agent: str, role: str, kind: str) -> str:
    """Which generator family suits an agent: tool output, web pages, or prose."""
    speaker = normalize_agent(agent)  # "Orchestrator (-> WebSurfer)" speaks as the orchestrator
    if kind == "observation" or role == "tool" or _TOOL_NAMES.search(speaker):
        return "tool"
    if _WEB_NAMES.search(speaker):
        return "web"
    return "prose"


def paragraphs_of(text: str, limit: int = 1600) -> list[str]:
    """A step's text cut at blank lines, long blocks cut again at line ends (at most `limit` chars)."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        block = block.strip("\n")
        while len(block) > limit:
            cut = block.rfind("\n", 0, limit)
            cut = cut if cut > limit // 4 else limit
            out.append(block[:cut])
            block = block[cut:].lstrip("\n")
        if block.strip():
            out.append(block)
    return out


def vocabulary(texts: Iterable[str], size: int = 400) -> list[str]:
    """The run's most frequent content words (its topic), padded with generic nouns."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP)
    words = [w for w, n in counts.most_common(size) if n > 1 and _READABLE.fullmatch(w)]
    return words if len(words) >= 30 else words + [w for w in _FALLBACK_VOCAB.split() if w not in words]


def redraw_numbers(text: str, rng: random.Random) -> str:
    """Every digit run replaced by random digits of the same length (a detour sees other values)."""
    return _DIGITS.sub(lambda m: "".join(rng.choice("0123456789") for _ in m.group()), text)


# ---- generators ------------------------------------------------------------------------------

Gen = Callable[[random.Random, list[str]], str]


def _term(rng: random.Random, vocab: list[str]) -> str:
    return rng.choice(vocab) if rng.random() < 0.6 else f"{rng.choice(vocab)} {rng.choice(vocab)}"


def _ident(rng: random.Random, vocab: list[str]) -> str:
    return re.sub(r"\W+", "_", _term(rng, vocab))


_SENTENCES = (
    "Let me double-check the {a} before we move on, since the {b} depends on it.",
    "The previous output lists {n} entries for {a}; I will cross-reference them with the {b}.",
    "Before answering, it is worth confirming that the {a} matches what the task describes.",
    "I looked at the {a} again and nothing there contradicts the {b} so far.",
    "To be thorough, I will also check whether the {a} changed between versions {n} and {m}.",
    "The {a} section is long; the relevant part seems to be the paragraph about {b}.",
    "This detour is only to rule out the {a} as a source of confusion.",
    "So far we have {n} candidate values for the {a}, and {m} of them come from the {b}.",
    "I will note the {a} here so that we can come back to it if the {b} turns out incomplete.",
    "The format of the {a} is slightly different from what I expected, but the content is usable.",
    "Next, I will look for an independent source that mentions the {a}.",
    "There is a second listing of the {a}; it agrees with the first one on {n} of {m} rows.",
    "We should keep the {a} and the {b} separate to avoid mixing the two lists.",
    "A quick sanity check on the {a}: the totals add up to {n}.",
    "The {a} page loaded, but the table about {b} is split over two sections.",
    "I am going to re-run the lookup for {a} with a narrower query.",
    "Nothing in the {a} suggests we need to change the plan yet.",
    "For completeness, here is what the {b} says about the {a}.",
    "The {a} was last updated {n} days ago according to its header.",
    "That matches the earlier note about the {b}, so we can continue.",
)
_PLAN_ITEMS = (
    "Review the {a} and extract the fields about {b}.",
    "Compare the {a} against the {b} and list any differences.",
    "Confirm the {a} with a second source.",
    "Summarise what the {a} says about the {b}.",
    "Record the intermediate values for the {a} ({n} so far).",
    "Check the {b} for entries added after {n}.",
    "Keep the {a} notes for the final answer.",
)
_CODE = (
    "```python\nimport pandas as pd\n\ndf = pd.read_csv('{f}.csv')\nprint(df['{c}'].describe())\nprint(len(df))\n```",
    "```python\nwith open('{f}.txt') as fh:\n    lines = [l.strip() for l in fh if '{c}' in l]\nprint(len(lines))\nprint(lines[:{n}])\n```",
    "```python\nimport json\n\ndata = json.load(open('{f}.json'))\nitems = [d for d in data if d.get('{c}')]\nprint(len(items), items[:3])\n```",
    "```python\nvalues = {{'{c}': {n}, '{f}': {m}}}\nfor key, value in sorted(values.items()):\n    print(key, value)\n```",
    "```sh\ngrep -n '{c}' {f}.log | head -{n}\n```",
)


_LEADS = (
    "",
    "",
    "Next, ",
    "So far, ",
    "For now, ",
    "On second look, ",
    "To be safe, ",
    "Going back to it, ",
    "As a check, ",
    "Separately, ",
)
_CLAUSES = (
    "I compared the {a} with the {b}",
    "the {a} lists {n} rows",
    "we still have to confirm the {a}",
    "the {b} mentions the {a} only once",
    "I opened the page about the {a}",
    "the values for the {a} add up to {m}",
    "nothing in the {a} points at the {b}",
    "the {a} and the {b} agree",
    "I ran the query for the {a} again",
    "the {a} is sorted by {b}",
    "the lookup returned {n} matches for the {a}",
    "the {a} section has a note on the {b}",
    "I will keep the {a} for later",
    "the first {n} entries of the {a} look consistent",
    "the {b} field is empty in {n} of the {a} entries",
    "the {a} was moved to a different section",
)
_TAILS = (
    ".",
    ".",
    ", which is expected.",
    ", so we can move on.",
    " as far as I can tell.",
    "; I will verify it once more.",
    ", but it does not change the plan.",
    " according to the source.",
    ", and the rest can wait.",
)


def sentence(rng: random.Random, vocab: list[str]) -> str:
    """One sentence of a detour: a whole template, or a lead, a clause and a tail put together."""
    fill = _filler_values(rng, vocab)
    if rng.random() < 0.4:
        return rng.choice(_SENTENCES).format(**fill)
    text = rng.choice(_LEADS) + rng.choice(_CLAUSES).format(**fill) + rng.choice(_TAILS)
    return text[0].upper() + text[1:]


def prose(rng: random.Random, vocab: list[str]) -> str:
    """A few sentences of reasoning, sometimes with a short plan or a code block."""
    pick = rng.random()
    fill = _filler_values(rng, vocab)
    if pick < 0.15:
        count = rng.randint(2, 5)
        items = rng.sample(_PLAN_ITEMS, count)
        return "Plan:\n" + "\n".join(f"{i + 1}. {t.format(**_filler_values(rng, vocab))}" for i, t in enumerate(items))
    if pick < 0.3:
        return sentence(rng, vocab) + "\n\n" + rng.choice(_CODE).format(**fill)
    return " ".join(sentence(rng, vocab) for _ in range(rng.randint(2, 5)))


def _filler_values(rng: random.Random, vocab: list[str]) -> dict[str, str]:
    return {
        "a": _term(rng, vocab),
        "b": _term(rng, vocab),
        "c": _ident(rng, vocab),
        "f": _ident(rng, vocab),
        "n": str(rng.randint(2, 99)),
        "m": str(rng.randint(2, 999)),
    }


def tool_output(rng: random.Random, vocab: list[str]) -> str:
    """What a terminal or a tool prints: a table, a listing, a log, JSON or a test summary."""
    kind = rng.randrange(5)
    if kind == 0:
        cols = [_ident(rng, vocab) for _ in range(rng.randint(3, 6))]
        rows = [
            ",".join(str(rng.randint(0, 9999)) if rng.random() < 0.5 else rng.choice(vocab) for _ in cols)
            for _ in range(rng.randint(3, 12))
        ]
        return ",".join(cols) + "\n" + "\n".join(rows)
    if kind == 1:
        return "\n".join(
            f"-rw-r--r-- 1 user user {rng.randint(100, 99999):>6} Mar {rng.randint(1, 28):>2} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} "
            f"{_ident(rng, vocab)}.{rng.choice(('py', 'csv', 'json', 'txt', 'md', 'log'))}"
            for _ in range(rng.randint(3, 10))
        )
    if kind == 2:
        return "\n".join(
            f"2024-0{rng.randint(1, 9)}-{rng.randint(10, 28)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} "
            f"{rng.choice(('INFO', 'INFO', 'DEBUG', 'WARNING'))} {_term(rng, vocab)}: {rng.choice(('loaded', 'parsed', 'cached', 'skipped', 'done'))} "
            f"{rng.randint(1, 500)} items"
            for _ in range(rng.randint(3, 10))
        )
    if kind == 3:
        items = ", ".join(
            f'{{"{_ident(rng, vocab)}": "{_term(rng, vocab)}", "count": {rng.randint(0, 300)}}}' for _ in range(rng.randint(2, 6))
        )
        return f"[{items}]"
    passed = rng.randint(3, 60)
    return f"collected {passed} items\n\n" + "." * passed + f"\n\n{passed} passed in {rng.uniform(0.1, 9.9):.2f}s"


def web_page(rng: random.Random, vocab: list[str]) -> str:
    """Page text a browsing agent reports: a title with its address, some text, a few links."""
    head = _term(rng, vocab).title()
    site = _ident(rng, vocab).replace("_", "-")
    if rng.random() < 0.4:
        links = "\n".join(f"- [{_term(rng, vocab).title()}](https://www.{site}.org/{_ident(rng, vocab)})" for _ in range(rng.randint(2, 6)))
        return f"Links on the page about {head}:\n{links}"
    text = " ".join(
        f"The {_term(rng, vocab)} {rng.choice(('is listed', 'appears', 'is described', 'is mentioned'))} "
        f"{rng.choice(('under', 'next to', 'after', 'in'))} the {_term(rng, vocab)} section."
        for _ in range(rng.randint(2, 6))
    )
    return f"Title: {head} | {site}\nAddress: https://www.{site}.org/{_ident(rng, vocab)}\n\n{text}"


GENERATORS: dict[str, tuple[Gen, ...]] = {"tool": (tool_output,), "web": (web_page, prose), "prose": (prose,)}


@dataclass
class FillerWriter:
    """Writes benign steps for the voices of one run, never reusing the fault's text."""

    vocab: list[str]
    fault: FaultText
    rng: random.Random
    reuse_share: float = 0.4  # how often a paragraph comes from the agent's own earlier ones
    originals: frozenset[str] = frozenset()  # the run's real steps: filler never repeats one whole

    def content(self, voice: Voice, chars: int) -> str:
        """About `chars` characters in `voice`'s style: an opening line, then paragraphs."""
        parts: list[str] = []
        total = 0
        if voice.openers and self.rng.random() < 0.7:  # headers ("exitcode: 0 ...") repeat as they are
            opener = self.rng.choice(voice.openers)
            parts.append(opener)
            total += len(opener)
        gens = GENERATORS[voice.style]
        reuse = self.reuse_share * min(1.0, len(voice.paragraphs) / 8)  # few of its own: mostly new text
        tries = 0
        while total < chars and tries < 1000:
            tries += 1
            if voice.paragraphs and self.rng.random() < reuse:
                para = redraw_numbers(self.rng.choice(voice.paragraphs), self.rng)
            else:
                para = self.rng.choice(gens)(self.rng, self.vocab)
            if self.fault.touches(para) or (parts and para.startswith(parts[0])):  # no header twice
                continue
            parts.append(para)
            total += len(para) + 2
        text = _cut("\n\n".join(parts), max(chars, 40))
        while text.strip() in self.originals:  # a detour redoes work in its own words
            text = f"{text}\n\n{self.rng.choice(gens)(self.rng, self.vocab)}"
        return text


def _cut(text: str, chars: int) -> str:
    """`text` cut to about `chars` characters, at a line, sentence or word end where one is near."""
    if len(text) <= chars:
        return text
    for mark in ("\n", ". "):
        cut = text.rfind(mark, 0, chars)
        if cut > chars // 2:
            return text[: cut + len(mark)].rstrip()
    end = text.find(". ", chars)  # a whole sentence a little past the size beats a cut one
    if 0 < end < chars * 2:
        return text[: end + 1]
    cut = text.rfind(" ", 0, chars)
    return text[: cut if cut > chars // 2 else chars].rstrip()
