"""Per-method cost models for `localfa bench --estimate`: per-trace figure = a * tokens**b (tokens at
4 characters each). Written by `scripts/bench_cost.py --write-models`; do not edit by hand."""

MEASURED = "scripts/bench_cost.py on 2026-12-03 (2-core box, load 9-18): 60 dev traces + long runs 10k,50k,200k,1M from 2 of them, tokenizer embedded SmolLM2-135M-Instruct, window 32768; refitted with --from-costs (errored diagnoses left out)"
MODELS: dict[str, dict[str, tuple[float, float]]] = {
    "safari": {
        "calls": (0.4285, 0.323151),
        "prompt_tokens": (44.2175, 0.760938),
        "uncached_tokens": (23.4191, 0.75754),
        "completion_tokens": (79.4362, 0.260089),
    },
    "falat": {
        "calls": (0.0330268, 0.707621),
        "prompt_tokens": (35.3371, 0.834906),
        "uncached_tokens": (13.4847, 0.841752),
        "completion_tokens": (2.14706, 0.812357),
    },
    "drift": {
        "calls": (0.113333, 0.511234),
        "prompt_tokens": (0.63116, 1.33765),
        "uncached_tokens": (1.7576, 1.00514),
        "completion_tokens": (3.21898, 0.663014),
    },
    "all-at-once": {
        "calls": (1, 0),
        "prompt_tokens": (3.46338, 0.873573),
        "uncached_tokens": (3.46338, 0.873573),
        "completion_tokens": (45.8992, -0.0409674),
    },
    "step-by-step": {
        "calls": (0.00565564, 0.817921),
        "prompt_tokens": (0.221097, 1.27496),
        "uncached_tokens": (12.3768, 0.654841),
        "completion_tokens": (0.00565564, 0.817921),
    },
    "binary-search": {
        "calls": (0.495285, 0.243132),
        "prompt_tokens": (7.16758, 0.877839),
        "uncached_tokens": (1.7322, 0.988782),
        "completion_tokens": (6.26362, 0.119654),
    },
}
