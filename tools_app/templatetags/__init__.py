"""Template filters of the console's own pages."""
