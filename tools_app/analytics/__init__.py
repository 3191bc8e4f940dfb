"""Run analytics (docs/runs.md, "Analytics"): the figures of a tool's runs and of the whole
console over a window (figures.py), percentiles computed by the database or exactly the
same way on SQLite (percentiles.py), and the charts' geometry (chart.py). No HTTP here."""
