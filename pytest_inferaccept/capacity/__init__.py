"""Capacity and stability scenarios on the load engine: ladder, sweep, soak, push to failure.

See docs/capacity.md for what each scenario does, its bounds and how its verdict is reached.
"""
