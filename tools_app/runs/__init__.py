"""Tool runs: start them (start.py), execute them in the worker (execute.py), cancel
(cancel.py) and reap them (reaper.py); their artifacts (runs/artifacts.py), what a run is
given (setup.py) and its progress (runs/progress.py)."""
