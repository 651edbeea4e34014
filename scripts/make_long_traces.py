"""Long labelled runs on demand: grow labelled traces to a chosen length, the fault at a chosen depth.

Each trace gets benign steps in its own voices inserted before and after its labelled fault
(`localfa.traces.longruns.lengthen`), its labels shifted; the runs are written as Who&When files
under OUT/<subset>/<name>-L<length>-D<depth>-s<seed>.json, which every localfa command reads.
Same input, length, depth and seed: the same files. Tokens are 4 characters each (records as
methods show them). A trace whose fault already lies deeper than asked is skipped, with a line.

    python scripts/make_long_traces.py --out runs/long --window 32768 --depths 1,2,5
    python scripts/make_long_traces.py --out runs/long --length 1M --depth 500k --limit 2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _project_venv  # noqa: F401 - under .venv/bin/python when localfa is not importable here

from localfa.bench.sweep import load_traces
from localfa.traces.longruns import LongRunError, as_whowhen, lengthen, parse_tokens, window_depths

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "whowhen"


def targets(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(length, depth) pairs asked for: one --length/--depth, or the fault at multiples of --window."""
    if args.length:
        length = parse_tokens(args.length)
        return [(length, parse_tokens(args.depth) if args.depth else length // 2)]
    multiples = [float(m) for m in args.depths.split(",") if m.strip()]
    return window_depths(args.window, multiples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="*", default=[str(DEFAULT_DATA)], help="labelled traces (default: the Who&When dev split)")
    ap.add_argument("--out", required=True, type=Path, help="folder to write the long runs into")
    ap.add_argument("--length", default=None, help="tokens of each run, e.g. 200k (with --depth; default: from --window and --depths)")
    ap.add_argument("--depth", default=None, help="tokens before the fault (default: half the length)")
    ap.add_argument("--window", type=int, default=32768, help="context window the depths are multiples of (default 32768)")
    ap.add_argument("--depths", default="1,2,5", help="fault depths as multiples of the window (default 1,2,5), half a window after")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="at most N traces per subset")
    args = ap.parse_args()
    try:
        asked = targets(args)
    except ValueError as exc:
        print(f"error: --length/--depth: {exc}", file=sys.stderr)
        return 2
    written = skipped = 0
    for trace in load_traces(args.data, limit=args.limit):
        for length, depth in asked:
            try:
                grown = lengthen(trace, length, depth, seed=args.seed)
            except LongRunError as exc:
                print(f"skipped: {exc}", file=sys.stderr)
                skipped += 1
                continue
            stem = Path(trace.source).stem
            path = args.out / (trace.subset or "traces") / f"{stem}-L{length}-D{depth}-s{args.seed}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(as_whowhen(grown), ensure_ascii=False), encoding="utf-8")
            written += 1
    print(f"written={written} skipped={skipped} out={args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
