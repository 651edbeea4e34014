"""The oracle engine (`--engine oracle`, `--engine oracle:p=0.8`): method ceilings without a GPU.

An engine that knows each trace's labels (decisive step, responsible agent, fault spans) and
answers every request as a careful model would, by the definitions the prompt itself gives; with
probability 1 - p per call (seeded by the request) it gives a plausible wrong answer of the same
kind instead. It measures what a method's own machinery loses (a window that hides the labelled
step, a cap, a pruning rule, a budget) and how fast the method degrades as its model errs.

- `localfa.oracle.policy`: the policy protocol (`Policy`, `Rule`, `Ask`) and helpers for reading
  requests. Each method owns its policy, in a module beside it, named by the method class's
  `oracle_policy` ClassVar (``"localfa.methods.falat.oracle:POLICY"``), the way `view_path` is.
- `localfa.oracle.registry`: finds the policy rule that answers a request key.
- `localfa.oracle.engine`: the backend, registered in `localfa.engine.factory.ENGINES`.
"""
