"""Capacity and stability scenarios on the load engine: ladder, sweep, soak, push to failure, and more.

One module a scenario; `scenarios` holds the type they share (see its docstring). See
docs/capacity.md for what each scenario does, its bounds and how its verdict is reached.
"""
