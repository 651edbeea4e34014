"""A small categorised sample (Who&When format with AgentRx categories in `mistake_type`),
written for the tests: each run's decisive step is plain in its text, as a fault is."""

from __future__ import annotations

import json
from pathlib import Path

# (category, the faulty agent's words at the decisive step)
FAULTS = [
    ("Invention of New Information", "The museum opened in 1887, so the answer is 1887 (no source checked)."),
    ("Invalid Invocation", "Calling search(query=None, limit='ten') to find the paper."),
    ("Misinterpretation of Tool Output", "The tool says 404 for the page, which means the page lists 404 items."),
    ("Plan Adherence Failure", "Skipping the verification step the plan required and submitting now."),
    ("Invention of New Information", "The author's middle name is clearly Edward, I recall it."),
    ("Misinterpretation of Tool Output", "The table shows 12 rows; I read the count column as 21."),
]


def write_sample(folder: Path, n: int = len(FAULTS)) -> list[Path]:
    """Write `n` categorised runs into `folder`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        category, fault = FAULTS[i % len(FAULTS)]
        history = [
            {"name": "Planner", "role": "assistant", "content": f"Plan for task {i}: search, read the source, verify, answer."},
            {"name": "Researcher", "role": "assistant", "content": f"Searching the archive for item {i}."},
            {"name": "Solver", "role": "assistant", "content": fault},
            {"name": "Checker", "role": "assistant", "content": "I accept the previous result."},
            {"name": "Solver", "role": "assistant", "content": f"Final answer for task {i} submitted."},
        ]
        data = {
            "question": f"Task {i}: find the requested fact and report it.",
            "ground_truth": "unknown",
            "history": history,
            "mistake_agent": "Solver",
            "mistake_step": "2",
            "mistake_reason": fault,
            "mistake_type": category,
        }
        path = folder / f"{i + 1}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        paths.append(path)
    return paths
