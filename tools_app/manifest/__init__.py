"""TOOL.md: parsing and validating a tool's manifest (manifest/toolmd.py is the front door;
its parts are the document and checker, inputs, entry files, limits and languages), the
input schema, static checks of the code and the input files."""
