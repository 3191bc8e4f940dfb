"""The text form of list inputs (tools_app/lib/listinput.py), shared by the run form and the
presets form: one item per line, blank lines skipped but counted when naming a line."""

from __future__ import annotations

import pytest

from tools_app.catalog import presets
from tools_app.lib import listinput
from tools_app.manifest.inputs import InputSpec


def test_it_names_the_line_as_the_person_sees_it():
    assert listinput.parse_lines("integer", "1\n\n 2 \n") == [1, 2]
    with pytest.raises(listinput.LineError, match="^line 3: must be an integer"):
        listinput.parse_lines("integer", "1\n\nmany\n4")
    with pytest.raises(listinput.LineError, match="^line 2: must be true or false"):
        listinput.parse_lines("boolean", "true\nmaybe")
    assert listinput.parse_lines("string", "\n  \n") is None
    assert listinput.parse_lines("number", listinput.as_lines([1.5, 2])) == [1.5, 2]


def test_it_takes_a_list_preset_one_item_per_line_or_as_json():
    spec = InputSpec(name="ids", type="integer[]", description="Ids.", visibility="user-only")
    assert presets.parse_value(spec, "1\n\n2\n") == [1, 2]
    assert presets.parse_value(spec, "[3, 4]") == [3, 4]  # the API's form still works
    with pytest.raises(presets.PresetError, match="^ids: line 2: must be an integer"):
        presets.parse_value(spec, "1\nx")
