"""Correctness: known-answer items, their graders, the paired statistics and the answerer.

Pytest-free. The modules are imported on their own (`correctness.items`, `.graders`, `.paired`,
`.ties`, `.answerer`); this package module stays empty so that importing it costs nothing.
"""
