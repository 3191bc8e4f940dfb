"""Generic helpers free of Django: the strict YAML reader, list input, the JSON nesting cap."""
