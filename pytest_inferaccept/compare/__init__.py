"""The upgrade gate's readers: the offline CLI, the comparison as text, several runs side by side.

The comparison itself (reading a baseline, the diff and the rules that decide what regressed) is
`pytest_inferaccept.baseline`, below the run that calls it; `python -m pytest_inferaccept.compare`
runs it offline. This package's `__init__` imports nothing.
"""
