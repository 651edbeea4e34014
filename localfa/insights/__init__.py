"""What fails across many runs: a category for each diagnosis, and summaries over a sweep.

- `taxonomy`: named failure taxonomies (TRAIL, MAST, AgentRx ship with localfa; a user's own is a
  small TOML file).
- `categorise`: the optional pass (`localfa bench --categorise NAME`) that asks the model which
  category each diagnosed step falls in, grammar-constrained to the taxonomy's names, batched.
- `summary`: counts by category, agent, step kind and position; groups of diagnoses whose reasons
  say the same thing (TF-IDF + agglomerative clustering, no model); exemplars.
- `compare`: the shift of each category's share between two sweeps, with 95% intervals.
"""
