"""The run's core, below everything that reads it and free of pytest: what one load run produced."""
