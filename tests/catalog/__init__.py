"""Versions, diffs, bundles, seed sync and the DATA_PATH mirror, presets (tools_app/catalog/)."""
