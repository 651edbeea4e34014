"""Text from a trace or a results file, made safe to print on a terminal.

An agent named ``Coder\\x1b]0;PWNED\\x07`` sets the window title of whoever runs `inspect`; other
sequences move the cursor, clear the screen, rewrite the line just printed (a carriage return), or
(OSC 52) write to the clipboard. Every command prints trace-made text through `terminal_safe`,
which removes every escape and control sequence (ECMA-48: CSI, OSC, DCS, SOS, PM, APC and the
short ESC forms, in their 7-bit and 8-bit spellings), every other C0 and C1 control but tab and
newline, and the bidirectional overrides and isolates that make a terminal show text in another
order than it is. Colours are removed too: a trace cannot style our output. A leaf module.
"""

from __future__ import annotations

import re

# Strings ended by BEL or ST (ESC \ or 0x9c), or left unterminated: everything up to the end goes.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x9c\x1b]*(?:\x07|\x9c|\x1b\\)?"
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
_SHORT = r"\x1b[ -/]*[0-~]?"
_SEQUENCES = re.compile(f"{_STRING}|{_CSI}|{_SHORT}")
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` without escape or control sequences (tab and newline kept); see the module doc."""
    text = str(text)
    if text.isprintable():  # the usual case: nothing to remove (isprintable is False for any control)
        return text
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))
