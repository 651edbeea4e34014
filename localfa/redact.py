"""Keep secrets (API keys) out of what localfa writes: manifests, logs, error lines.

A run's manifest records the command line, and people share run directories; `--api-key sk-...`
must not travel with them. Every place that writes a command line or a server's error text
passes it through here: `redact` masks the keys this process knows of and anything shaped like a
credential (an Authorization header's value, a password in a URL, a key in a URL's query), and
`masked_errors` applies a mask to every error leaving a block (its message, its text
attributes and the errors it was raised from), so a server client masks at its edges rather
than at each message it builds.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence

MASK = "***"
SECRET_OPTIONS = ("--api-key",)
SECRET_ENV = ("LOCALFA_API_KEY", "VLLM_API_KEY")
# Credentials by their shape, whoever's they are: (pattern, groups kept around the masked part).
_SHAPES = (
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)[^\s\"',;}]+()"),
    re.compile(r"(?i)(\bbearer\s+)[^\s\"',;}]+()"),
    re.compile(r"(://[^/\s:@]*:)[^/\s@]+(@)"),  # scheme://user:PASSWORD@host
    re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|password|secret)=)[^&\s\"'#]+()"),
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
    """`text` with every known key, and every credential by its shape, replaced by ***."""
    for secret in known_secrets(secrets):
        if len(secret) >= 4:  # a one-letter "key" would mask half the text
            text = text.replace(secret, MASK)
    for shape in _SHAPES:
        text = shape.sub(lambda m: m.group(1) + MASK + m.group(2), text)
    return text


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
