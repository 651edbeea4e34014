"""Per-method cost models for `localfa bench --estimate`: per-trace figure = a * tokens**b (tokens at
4 characters each). Written by `scripts/bench_cost.py --write-models`; do not edit by hand."""

MEASURED = "scripts/bench_cost.py on 2026-12-03, 2 dev traces + long runs 10k,20k, tokenizer embedded SmolLM2-135M-Instruct"
MODELS: dict[str, dict[str, tuple[float, float]]] = {
    "safari": {
        "calls": (1, 0),
        "prompt_tokens": (236.004, 0.412016),
        "uncached_tokens": (236.004, 0.412016),
        "completion_tokens": (14.2746, 0.0408795),
    },
    "falat": {
        "calls": (0.0434377, 0.696556),
        "prompt_tokens": (93.5057, 0.72398),
        "uncached_tokens": (60.8184, 0.666466),
        "completion_tokens": (1.471, 0.874543),
    },
    "drift": {
        "calls": (0.047032, 0.637794),
        "prompt_tokens": (0.192325, 1.50588),
        "uncached_tokens": (8.71017, 0.80471),
        "completion_tokens": (2.76132, 0.693175),
    },
    "all-at-once": {
        "calls": (1, 0),
        "prompt_tokens": (2.90279, 0.897481),
        "uncached_tokens": (2.90279, 0.897481),
        "completion_tokens": (26.2882, 0.0212798),
    },
    "step-by-step": {
        "calls": (1.78694e-05, 1.51639),
        "prompt_tokens": (0.000270465, 2.10382),
        "uncached_tokens": (0.867631, 0.986472),
        "completion_tokens": (1.78694e-05, 1.51639),
    },
    "binary-search": {
        "calls": (0.341792, 0.298868),
        "prompt_tokens": (8.89944, 0.863802),
        "uncached_tokens": (1.13722, 1.03868),
        "completion_tokens": (22.8652, -0.0455826),
    },
}
