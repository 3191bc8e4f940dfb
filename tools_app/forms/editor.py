"""Forms of the tool editor: new tool, edit (TOOL.md + a formset of files), import, diff.

Browsers submit textarea text with CRLF line breaks whatever the file had, so each text
carries a hidden `newline` field ("lf" or "crlf", from the stored file) and is converted
back on save: editing one line of a script never rewrites every line ending in it."""

from __future__ import annotations

from collections.abc import Mapping

from django import forms
from django.forms import BaseFormSet, formset_factory

from tools_app.catalog import bundle
from tools_app.catalog.importer import MAX_ZIP_BYTES
from tools_app.manifest.languages import LANGUAGES
from tools_app.manifest.limits import MAX_DESCRIPTION, MAX_VERSION
from tools_app.manifest.toolmd import NAME_RE
from tools_app.models import Tool

NEWLINES = [("lf", "LF"), ("crlf", "CRLF")]
CODE_ATTRS = {"rows": 18, "spellcheck": "false", "autocomplete": "off", "data-code-editor": ""}


def newline_of(text: str) -> str:
    return "crlf" if "\r\n" in text and text.count("\r\n") == text.count("\n") else "lf"


def typed_text(text: str, newline: str) -> str:
    """Text from a textarea (CRLF or LF line breaks) with the file's own line breaks."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\n", "\r\n") if newline == "crlf" else text


class NewToolForm(forms.Form):
    name = forms.CharField(
        max_length=64,
        help_text="Lowercase letters, digits and _, starting with a letter. Cannot be changed.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "pattern": "[a-z][a-z0-9_]{0,63}"}),
    )
    language = forms.ChoiceField(choices=[(lang, lang) for lang in LANGUAGES])
    label = forms.CharField(max_length=200, required=False)
    description = forms.CharField(
        max_length=MAX_DESCRIPTION,
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the tool does and when an agent should use it. You can edit it later.",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not NAME_RE.fullmatch(name):
            raise forms.ValidationError(
                "Use lowercase letters, digits and _, starting with a letter (at most 64)."
            )
        if Tool.objects.filter(name=name).exists():
            raise forms.ValidationError(f"A tool named {name!r} exists already.")
        return name


class ToolEditForm(forms.Form):
    # The version the editor started from: a newer latest version means a conflict.
    base = forms.IntegerField(min_value=1, max_value=MAX_VERSION, widget=forms.HiddenInput)
    toolmd = forms.CharField(
        label="TOOL.md",
        strip=False,
        widget=forms.Textarea(attrs={**CODE_ATTRS, "rows": 24, "data-path": "TOOL.md"}),
    )
    toolmd_newline = forms.ChoiceField(choices=NEWLINES, initial="lf", widget=forms.HiddenInput)
    note = forms.CharField(
        max_length=500,
        required=False,
        help_text="What changed and why; shown in the version history.",
    )
    publish = forms.BooleanField(required=False, label="Publish this version")

    def __init__(self, *args, can_publish: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not can_publish:
            del self.fields["publish"]

    def clean_toolmd(self) -> str:
        text = self.cleaned_data["toolmd"]
        if "\x00" in text:
            raise forms.ValidationError("TOOL.md may not contain NUL characters.")
        return text

    def toolmd_bytes(self) -> bytes:
        data = self.cleaned_data
        return typed_text(data["toolmd"], data["toolmd_newline"]).encode("utf-8")


class ToolFileForm(forms.Form):
    path = forms.CharField(max_length=bundle.MAX_PATH_CHARS, strip=True)
    content = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs=CODE_ATTRS))
    newline = forms.ChoiceField(
        choices=NEWLINES, initial="lf", required=False, widget=forms.HiddenInput
    )
    # A file that is not UTF-8 cannot be edited as text: it is kept as stored (by its
    # path in the base version) unless deleted.
    binary = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.is_binary = bool(self.fields["binary"].to_python(self["binary"].value()))
        if self.is_binary:
            # Kept by path from the base version: renaming it would lose it.
            self.fields["path"].widget.attrs["readonly"] = True
        # The code editor reads the file name (for highlighting) from the path input.
        self.fields["content"].widget.attrs["data-path-input"] = self["path"].auto_id

    def clean_path(self) -> str:
        path = self.cleaned_data["path"]
        try:
            bundle.safe_relpath(path)
        except bundle.BundleError as exc:
            raise forms.ValidationError(str(exc)) from None
        if path == "TOOL.md":
            raise forms.ValidationError("TOOL.md is edited above, not as an extra file.")
        return path

    def text_bytes(self) -> bytes:
        data = self.cleaned_data
        return typed_text(data.get("content") or "", data.get("newline") or "lf").encode("utf-8")


class BaseToolFileFormSet(BaseFormSet):
    def clean(self) -> None:
        if any(self.errors):
            return
        seen: set[str] = set()
        for form in self.kept_forms():
            path = form.cleaned_data["path"]
            if path in seen:
                raise forms.ValidationError(f"Two files are named {path}.")
            seen.add(path)

    def kept_forms(self) -> list[ToolFileForm]:
        """Forms that are files of the new version: not deleted, not left blank."""
        return [
            form
            for form in self.forms
            if form.cleaned_data.get("path") and not form.cleaned_data.get("DELETE")
        ]


ToolFileFormSet = formset_factory(
    ToolFileForm,
    formset=BaseToolFileFormSet,
    extra=0,
    can_delete=True,
    max_num=bundle.MAX_FILES,
    validate_max=True,
    absolute_max=bundle.MAX_FILES + 10,
)


def initial_files(files: Mapping[str, bytes], entry: str | None) -> tuple[dict, list[dict]]:
    """Initial data for ToolEditForm (TOOL.md) and ToolFileFormSet (the other files,
    the entry file first)."""
    text = files.get("TOOL.md", b"").decode("utf-8-sig", errors="replace")
    form = {"toolmd": text.replace("\r\n", "\n"), "toolmd_newline": newline_of(text)}
    rows = []
    for path in sorted(files, key=lambda p: (p != entry, p)):
        if path == "TOOL.md":
            continue
        try:
            content = files[path].decode("utf-8")
        except UnicodeDecodeError:
            rows.append({"path": path, "content": "", "binary": True, "newline": "lf"})
            continue
        rows.append(
            {
                "path": path,
                "content": content.replace("\r\n", "\n"),
                "newline": newline_of(content),
                "binary": False,
            }
        )
    return form, rows


def collect_files(
    form: ToolEditForm, formset: BaseToolFileFormSet, base_files: Mapping[str, bytes]
) -> dict[str, bytes]:
    """The new version's files from a valid form and formset. Binary files come from the
    base version (raises BundleError if it does not have them)."""
    files = {"TOOL.md": form.toolmd_bytes()}
    for file_form in formset.kept_forms():
        path = file_form.cleaned_data["path"]
        if file_form.cleaned_data.get("binary"):
            if path not in base_files:
                raise bundle.BundleError(f"{path}: a binary file cannot be added or renamed here")
            files[path] = base_files[path]
        else:
            files[path] = file_form.text_bytes()
    bundle.check_files(files)
    return files


class ImportForm(forms.Form):
    file = forms.FileField(
        label="Zip file",
        help_text="One or more tool folders (name/TOOL.md, name/index.ts, ...).",
        widget=forms.ClearableFileInput(attrs={"accept": ".zip,application/zip"}),
    )
    publish = forms.BooleanField(
        required=False, label="Publish every imported version (otherwise they are drafts)"
    )

    def __init__(self, *args, can_publish: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not can_publish:
            del self.fields["publish"]

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_ZIP_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; at most {MAX_ZIP_BYTES:,} are accepted."
            )
        return upload


class DiffForm(forms.Form):
    a = forms.IntegerField(min_value=1, max_value=MAX_VERSION, label="From version")
    b = forms.IntegerField(min_value=1, max_value=MAX_VERSION, label="To version")


class BaseVersionForm(forms.Form):
    """Roll back: carries the latest version the person saw, to detect a newer save."""

    base = forms.IntegerField(min_value=1, max_value=MAX_VERSION, widget=forms.HiddenInput)
