"""A tool's test cases (docs/cases.md): cases.yaml parsed and checked (document.py), a run's
outcome judged against a case (evaluate.py), expectations proposed from a run (propose.py)
and cases.yaml rewritten one case at a time (write.py). No Django: the runs, the vault and
the pages that use them live in runs/replay.py, catalog/case_secrets.py and views/."""
