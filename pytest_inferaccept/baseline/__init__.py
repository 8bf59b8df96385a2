"""The comparison of a run with its baseline run: what the verdict reads about what changed since.

Pure: it reads two runs in the typed model and returns the model's `BaselineComparison`, with the
verdict's regressions and warnings (`baseline.gate.against_baseline`). `run.finish` calls it before
the verdict; `compare/` (the offline CLI, the text and the side-by-side view) reads what it returns.
This package's `__init__` imports nothing.
"""
