"""Keep secrets (API keys) out of what localfa writes: manifests, logs, error lines, and all it
writes from a trace.

A run's manifest records the command line, and people share run directories; `--api-key sk-...`
must not travel with them. Every place that writes a command line or a server's error text
passes it through here: `redact` masks the keys this process knows of and anything shaped like a
credential (an Authorization header's value, a password in a URL, a key in a URL's query, the
well-known key formats: ``sk-...``, ``sk-proj-...``, ``ghp_...``, ``hf_...``, ``AKIA...``), and
`masked_errors` applies a mask to every error leaving a block (its message, its text
attributes and the errors it was raised from), so a server client masks at its edges rather
than at each message it builds.

A trace may carry a key too (an agent that printed its environment, a logged request header).
Trace files are masked as they are read (`localfa.traces.load`), so no prompt, record, cached
response or page holds it; records, the response cache and pages are masked again as they are
written, for what a model or an error message adds. A masked part never holds a backslash or a
quote, so masking JSON or HTML text keeps it well formed.
"""

from __future__ import annotations

import html
import json
import os
import re
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

MASK = "***"
SECRET_OPTIONS = ("--api-key",)
SECRET_ENV = ("LOCALFA_API_KEY", "VLLM_API_KEY")
# Credentials by their shape, whoever's they are: (pattern, groups kept around the masked part).
_SHAPES = (
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)[^\s\"',;}\\<&]+()"),
    re.compile(r"(?i)(\bbearer\s+)[^\s\"',;}\\<&]+()"),
    re.compile(r"(://[^/\s:@\"'\\]*:)[^/\s@\"'\\]+(@)"),  # scheme://user:PASSWORD@host
    re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|password|secret)=)[^&\s\"'#\\<]+()"),
    # Keys by their published formats: OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), GitHub, Hugging
    # Face, Slack, AWS access key ids, Google API keys.
    re.compile(
        r"()\b(?:sk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"
        r"|hf_[A-Za-z0-9]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})\b()"
    ),
)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with the value of every secret option masked (`--api-key K` and `--api-key=K`)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if name in SECRET_OPTIONS:
            if eq:
                out.append(f"{name}={MASK}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return [redact(a) for a in out]


def known_secrets(extra: Iterable[str | None] = ()) -> list[str]:
    """The keys this process knows of: the ones given, and those in the key variables."""
    found = [s for s in (*extra, *(os.environ.get(v) for v in SECRET_ENV)) if s]
    return sorted(set(found), key=len, reverse=True)  # longest first: a key inside another


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every known key (as written, and as JSON or HTML would escape it), and every
    credential by its shape, replaced by ***."""
    for secret in known_secrets(secrets):
        if len(secret) >= 4:  # a one-letter "key" would mask half the text
            for form in dict.fromkeys((secret, json.dumps(secret)[1:-1], html.escape(secret))):
                text = text.replace(form, MASK)
    for shape in _SHAPES:
        text = shape.sub(lambda m: m.group(1) + MASK + m.group(2), text)
    return text


def redact_value(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with every string, keys too, passed through `redact`."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def masker(secrets: Iterable[str | None] = ()) -> Callable[[str], str]:
    """`redact` with these keys (besides those in the key variables) as one function of a text."""
    known = list(secrets)
    return lambda text: redact(text, known)


def mask_error(exc: BaseException, mask: Callable[[str], str]) -> BaseException:
    """`exc` masked in place: its message, its text attributes, and those of the errors it was
    raised from or during (a traceback prints them too)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.args = tuple(mask(a) if isinstance(a, str) else a for a in e.args)
        for name, value in list(getattr(e, "__dict__", {}).items()):
            if isinstance(value, str):
                setattr(e, name, mask(value))
        todo += [e.__cause__, e.__context__]
    return exc


@contextmanager
def masked_errors(mask: Callable[[str], str]) -> Iterator[None]:
    """Every error raised out of the block is masked (`mask_error`) before it goes on."""
    try:
        yield
    except Exception as exc:
        mask_error(exc, mask)
        raise
