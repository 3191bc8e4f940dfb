"""The tools shipped in seed/tools, validated and run for real."""
