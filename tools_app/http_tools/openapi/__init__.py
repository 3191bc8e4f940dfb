"""Drafting http tools from an OpenAPI document. plan.py holds all of it for now (reading
the document, following its refs, building each tool, planning and importing); it is to
be split along those seams into document.py, refs.py and build.py, plan.py staying the
front door."""
