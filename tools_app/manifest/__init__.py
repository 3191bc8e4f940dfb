"""TOOL.md: parsing and validating a tool's manifest (manifest/toolmd.py is the front door), the
input schema, static checks of the code and the input files."""
