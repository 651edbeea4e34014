"""Ensembles: methods whose programs run other methods' programs, interleaved on one trace.

`vote` answers the step most of its members name; `cascade` runs cheap stages first and escalates
only while they disagree. Both are methods like any other (one registry line each): their members'
requests go to the engine in shared batches, so siblings share the trace's cached prefix.
"""
