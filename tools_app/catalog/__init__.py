"""The tool catalog: versions and their diff, bundles, zip import, seed sync, the DATA_PATH
mirror, presets, rendering, the loader shims and the new-tool templates."""
