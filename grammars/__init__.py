"""The grammars of every structured output, one module per method.

Shipped inside the package as `localfa.grammars`. Grammars are built per trace where that makes
a wrong answer impossible (step ids that exist, offsets inside the trace).
"""
