"""A tool's test cases: cases.yaml parsed, evaluated, proposed and rewritten (tools_app/cases/)."""
