"""Tool runs: start, execute, cancel and reap them (execute.py), what a run is given
(setup.py) and its progress (runs/progress.py)."""
