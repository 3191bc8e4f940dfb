"""Side-by-side diffs: frontmatter, body and each file, highlighted, changes marked."""

from __future__ import annotations

from django.utils.safestring import SafeString

from tests.support import tool_files
from tools_app.audit import Actor
from tools_app.catalog import diff
from tools_app.catalog.rendering import MAX_HIGHLIGHT_CHARS
from tools_app.catalog.versions import save_version


def _sections(a: dict, b: dict) -> dict[str, diff.Section]:
    return {s.title: s for s in diff.diff_files(a, b)}


def test_it_compares_frontmatter_body_and_each_file_separately():
    a = tool_files("alpha", description="One.", body="# Alpha\n\n## Usage\n\nCall it.\n")
    b = tool_files("alpha", description="Two.", body="# Alpha\n\n## Usage\n\nCall it twice.\n")
    b["lib/util.ts"] = b"export const x = 1;\n"

    sections = _sections(a, b)

    assert list(sections) == ["TOOL.md frontmatter", "TOOL.md body", "index.ts", "lib/util.ts"]
    front = sections["TOOL.md frontmatter"]
    assert (front.status, front.removed, front.added) == ("changed", 1, 1)
    [changed] = [row for row in front.rows if row.kind != "equal"]
    assert changed.kind == "replace"
    assert "One." in changed.left.html and "Two." in changed.right.html
    # Line 3 of TOOL.md (line 2 of the frontmatter, after its fence), as the editor says.
    assert changed.left.number == changed.right.number == 3
    body = sections["TOOL.md body"]
    assert body.status == "changed"
    [changed_body] = [row for row in body.rows if row.kind == "replace"]
    text = a["TOOL.md"].decode().splitlines()
    assert text[changed_body.left.number - 1] == "Call it."
    assert sections["index.ts"].status == "unchanged"
    added = sections["lib/util.ts"]
    assert added.status == "added" and added.added == 1 and added.removed == 0
    assert [row.kind for row in added.rows] == ["insert"]
    assert diff.summary(list(sections.values())) == (3, 2, 3)


def test_removed_files_and_binary_files():
    a = {**tool_files("alpha"), "old.txt": b"gone\n", "logo.png": b"\x89PNG\xff\x00"}
    b = {**tool_files("alpha"), "logo.png": b"\x89PNG\xfe\x00"}

    sections = _sections(a, b)

    assert sections["old.txt"].status == "removed"
    assert [row.kind for row in sections["old.txt"].rows] == ["delete"]
    logo = sections["logo.png"]
    assert logo.status == "changed" and logo.rows == [] and "binary" in logo.note


def test_lines_are_highlighted_and_escaped():
    html = diff.highlight_lines('const s = "<script>";\nlet n = 1;\n', "index.ts")
    assert len(html) == 2
    assert "&lt;script&gt;" in html[0] and "<script>" not in html[0]
    assert '<span class="kd">const</span>' in html[0]
    assert '<span class="mf">1</span>' in html[1]


def test_a_file_too_long_to_highlight_is_still_escaped():
    text = '"<script>alert(1)</script>";\n' + "x" * (MAX_HIGHLIGHT_CHARS + 1) + "\n"
    html = diff.highlight_lines(text, "index.ts")
    assert len(html) == 2
    assert html[0] == "&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;;"
    assert isinstance(html[0], SafeString)


def test_a_multi_line_token_is_closed_on_every_line():
    html = diff.highlight_lines('x = """one\ntwo\nthree"""\n', "index.py")
    assert len(html) == 3
    for line in html:
        assert line.count("<span") == line.count("</span>")


def test_long_unchanged_runs_collapse_around_the_change():
    a = "".join(f"line {n}\n" for n in range(1, 101))
    b = a.replace("line 50\n", "line fifty\n")

    rows, removed, added = diff.diff_text(a, b, "notes.txt")

    kinds = [row.kind for row in rows]
    assert kinds == ["skipped", *["equal"] * 3, "replace", *["equal"] * 3, "skipped"]
    assert rows[0].skipped == 46 and rows[-1].skipped == 47
    assert (rows[4].left.number, rows[4].right.number) == (50, 50)
    assert (removed, added) == (1, 1)


def test_split_toolmd():
    assert diff.split_toolmd("---\nname: a\n---\n# Body\n") == ("name: a\n", "# Body\n")
    assert diff.split_toolmd("no frontmatter") == ("", "no frontmatter")


def test_the_diff_page_shows_two_versions_side_by_side(viewer_client, db):
    system = Actor.system()
    save_version("alpha", tool_files("alpha", description="Before <b>."), actor=system)
    save_version("alpha", tool_files("alpha", description="After."), actor=system, note="why")

    response = viewer_client.get("/tools/alpha/diff/?a=1&b=2")

    assert response.status_code == 200
    html = response.content.decode()
    assert "Version 1 → version 2" in html
    assert 'class="diff highlight"' in html
    assert '<tr class="replace">' in html
    assert 'class="code old"' in html and 'class="code new"' in html
    assert "&lt;b&gt;." in html and "<b>" not in html
    assert "“why”" in html
    assert "/tools/highlight.css?v=" in html
    # The other order, and the defaults (the latest two versions).
    assert viewer_client.get("/tools/alpha/diff/?a=2&b=1").status_code == 200
    assert "Version 1 → version 2" in viewer_client.get("/tools/alpha/diff/").content.decode()


def test_bad_diff_parameters(viewer_client, make_tool):
    make_tool("alpha")
    assert viewer_client.get("/tools/alpha/diff/?a=1&b=9").status_code == 404
    assert viewer_client.get("/tools/alpha/diff/?a=x&b=1").status_code == 400
    assert viewer_client.get("/tools/alpha/diff/?a=99999999999&b=1").status_code == 400
    assert viewer_client.get("/tools/nope/diff/?a=1&b=1").status_code == 404
