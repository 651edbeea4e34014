"""Stage 1a (paper §2.1): the task-conditioned prior, and the expected output later stages judge by.

The prior call sees the task, the agents (role / system prompt / tools where the trace has them)
and the wrong final output, never the intermediate steps. Its answer is rendered once into a
fixed block that opens every later prompt, so all of a trace's calls share that prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import regex as re

from localfa.engine.types import Request
from localfa.grammars.falat import FalatLimits, prior_grammar, prior_max_tokens
from localfa.methods.base import MethodContext
from localfa.methods.baselines import agent_choices, shorten
from localfa.methods.falat.options import FalatOptions
from localfa.methods.falat.text import wrong_output
from localfa.methods.names import agent_names
from localfa.templates import render
from localfa.traces.model import Trace, normalize_agent


@dataclass(frozen=True)
class Prior:
    """What a correct run should look like, and the expected output with its source."""

    task: str
    expected_plan: str
    must_do: tuple[str, ...]
    expected_output: str
    expected_source: str  # "ground_truth" | "prior"
    wrong_output: str

    @property
    def same_as_wrong(self) -> bool:
        """The expected output says what the wrong output says, so it cannot tell them apart.

        Exact equality almost never holds when the wrong output is the run's last message (every
        algorithm-generated Who&When run), so what they *say* is compared: the numbers and names
        of the expected output all appear in the wrong one (`salient`); without any, the
        normalised expected text appears in it."""
        expected = salient(self.expected_output)
        if expected:
            return expected <= salient(self.wrong_output)
        want = normalised(self.expected_output)
        return bool(want) and want not in UNKNOWN and want in normalised(self.wrong_output)

    def block(self) -> str:
        """The shared opening of every later FALAT prompt."""
        return render("falat/_prior_block.j2", prior=self)

    def as_dict(self) -> dict[str, Any]:
        return {
            "expected_plan": self.expected_plan,
            "must_do": list(self.must_do),
            "expected_output": self.expected_output,
            "expected_output_source": self.expected_source,
            "expected_equals_wrong": self.same_as_wrong,
        }


UNKNOWN = frozenset({"unknown", "not known", "n a", "none"})
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[,\d]*\d)?(?:\.\d+)?")
_NAME = re.compile(r"(?<=[^.!?:\s]\s+)\p{Lu}[\p{L}\p{M}'\-]+|\p{Lu}[\p{L}\p{M}'\-]*\p{Lu}[\p{L}\p{M}'\-]*")


def salient(text: str) -> set[str]:
    """What a text says that an answer turns on: its numbers (thousands separators and trailing
    zeros folded: "1,000.50" -> "1000.5") and names (capitalised words not opening a sentence,
    and words with an inner capital: "iPhone", "WebSurfer"), case-folded."""
    numbers = set()
    for n in _NUMBER.findall(text):
        n = n.replace(",", "")
        numbers.add(n.rstrip("0").rstrip(".") if "." in n else n)
    return numbers | {w.casefold() for w in _NAME.findall(text)}


def normalised(text: str) -> str:
    """Case, punctuation and spacing folded away: "The answer is 4." == "the answer is 4"."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def ground_truth(trace: Trace, opts: FalatOptions) -> str | None:
    """The trace's correct answer, only when the run was asked to use it (stage 8)."""
    if not opts.with_ground_truth:
        return None
    gt = (trace.ground_truth or "").strip()
    return shorten(gt, opts.output_chars) if gt else None


def agent_cards(trace: Trace, cap_chars: int) -> list[dict[str, Any]]:
    """Each agent once, with its system prompt and tools where the trace records them."""
    infos = {normalize_agent(a.name): a for a in trace.agents}
    cards = []
    for name in agent_choices(trace):
        info = infos.get(normalize_agent(name))
        prompt = (info.system_prompt or "").strip() if info else ""
        cards.append(
            {
                "name": agent_names(trace).show(name),
                "system_prompt": shorten(prompt, cap_chars) if prompt else None,
                "tools": list(info.tools) if info else [],
            }
        )
    return cards


def prior_request(ctx: MethodContext, opts: FalatOptions, limits: FalatLimits, system: dict[str, str]) -> Request:
    trace = ctx.trace
    wrong, wrong_from = wrong_output(trace, opts.output_chars)
    gt = ground_truth(trace, opts)
    prompt = render(
        "falat/prior.j2",
        task=task_text(trace, opts.task_chars),
        agents=agent_cards(trace, opts.agent_prompt_chars),
        names_legend=agent_names(trace).legend,
        wrong_output=wrong,
        wrong_from=wrong_from,
        ground_truth=gt,
        limits=limits,
    )
    grammar = prior_grammar(limits, with_answer=gt is None)
    return ctx.request("falat/prior", [system, {"role": "user", "content": prompt}], grammar, opts.sampling(prior_max_tokens(limits)))


def task_text(trace: Trace, cap_chars: int) -> str:
    return shorten((trace.task or "").strip() or "(not recorded)", cap_chars)


def inputs_cut(trace: Trace, opts: FalatOptions) -> dict[str, dict[str, int]]:
    """The prior's inputs its bounds shortened: name -> {"limit", "chars"} (recorded as bounds hit)."""
    texts = {
        "task_chars": [(trace.task or "").strip()],
        "output_chars": [wrong_output(trace, 10**12)[0]] + ([(trace.ground_truth or "").strip()] if opts.with_ground_truth else []),
        "agent_prompt_chars": [(a.system_prompt or "").strip() for a in trace.agents],
    }
    out = {}
    for name, items in texts.items():
        longest = max((len(t) for t in items), default=0)
        if longest > getattr(opts, name):
            out[name] = {"limit": getattr(opts, name), "chars": longest}
    return out


def build_prior(ctx: MethodContext, opts: FalatOptions, value: dict[str, Any]) -> Prior:
    """The prior from the model's answer; the expected output is the ground truth when allowed."""
    gt = ground_truth(ctx.trace, opts)
    wrong, _ = wrong_output(ctx.trace, opts.output_chars)
    return Prior(
        task=task_text(ctx.trace, opts.task_chars),
        expected_plan=value["expected_plan"],
        must_do=tuple(value["must_do"]),
        expected_output=gt if gt is not None else value["expected_answer"],
        expected_source="ground_truth" if gt is not None else "prior",
        wrong_output=wrong,
    )
