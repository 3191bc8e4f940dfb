"""Drafting http tools from an OpenAPI document: reading it (document.py), following its
refs (refs.py), building each tool (build.py), and choosing, planning and importing
(plan.py, the front door)."""
