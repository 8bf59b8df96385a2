"""The upgrade gate: compare a run with a baseline run (and several runs side by side).

`compare.diff.compare(old, new, gate)` is the comparison; `python -m pytest_inferaccept.compare`
runs it offline. This package's `__init__` imports nothing: the settings load `compare.policy`
when the plugin loads, and that must stay cheap.
"""
