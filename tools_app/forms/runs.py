"""Forms of the run pages: the params form generated from a tool's inputs, its raw JSON
twin, and the run history filters."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import unquote_to_bytes

from django import forms
from django.contrib.auth import get_user_model

from tools_app.lib import listinput, nesting
from tools_app.manifest import input_files, schema
from tools_app.manifest.inputs import InputSpec
from tools_app.manifest.toolmd import NAME_RE, Manifest
from tools_app.models.runs import RunStatus, RunVia

# A raw params document larger than this is refused before it is parsed.
MAX_RAW_PARAMS = 1024 * 1024
RAW_MODE_FIELD = "raw-json"
NOT_UNICODE = "Not valid Unicode: it holds an unpaired surrogate or bytes that are not UTF-8."


def undecodable_names(body: bytes) -> set[str]:
    """The names of urlencoded values whose bytes are not UTF-8 (a lone surrogate, say).
    Django decodes those with U+FFFD in their place; the API refuses the same text with a
    422, so the form must refuse it too rather than run the tool with mangled input."""
    names = set()
    for pair in body.split(b"&"):
        name, _, value = pair.partition(b"=")
        try:
            unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            names.add(unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8", "replace"))
    return names


class JsonInputField(forms.CharField):
    """A `json` input: a textarea checked as JSON (static/js/json-input.js checks it as it
    is typed and pretty-prints it); the error names the input and where the text broke."""

    def __init__(self, **kwargs) -> None:
        attrs = {"rows": 6, "spellcheck": "false", "class": "code"}
        attrs["data-json-editor"] = kwargs.get("label", "")
        super().__init__(strip=True, widget=forms.Textarea(attrs=attrs), **kwargs)

    def prepare_value(self, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if not offerable(value):
            return ""
        return json.dumps(value, indent=2, ensure_ascii=False)

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if text in self.empty_values:
            return None
        # The input's value is level 2 of the params: refused where the API refuses it.
        return parse_json_field(self.label, text, root=f"params.{self.label}", level=2)


def offerable(value: Any) -> bool:
    """May an input's earlier value be offered again? Not one nested past the cap (a run
    stored before it): the form would refuse it, and indenting it recursed to a 500."""
    return nesting.too_deep(value, level=2) is None


def parse_json_field(label: str | None, text: str, root: str = "params", level: int = 1) -> Any:
    """JSON from a textarea, or a ValidationError saying where it broke, after "label: "
    (the message stands alone, capitalised, with no label). Past the nesting cap the
    message names the path, from `root` (the value's place, at `level`: lib/nesting.py)."""
    try:
        return nesting.loads(text, root=root, level=level)
    except nesting.TooDeep as exc:
        raise forms.ValidationError(str(exc)) from None
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
    except (ValueError, RecursionError):
        # Numbers past Python's digit limit, arrays nested thousands deep.
        problem = "not usable JSON: a number is too long or the nesting is too deep."
    if label is None:
        raise forms.ValidationError(problem[0].upper() + problem[1:])
    raise forms.ValidationError(f"{label}: {problem}")


class ListInputField(forms.CharField):
    """A `string[]`, `number[]`, `integer[]` or `boolean[]` input: one item per line (a
    person pastes a column of ids), each converted to the item type; blank lines are
    skipped. Schema validation checks the list again like any caller's."""

    def __init__(self, item_type: str, **kwargs) -> None:
        self.item_type = item_type
        attrs = {"rows": 4, "spellcheck": "false"}
        super().__init__(strip=False, widget=forms.Textarea(attrs=attrs), **kwargs)

    def prepare_value(self, value: Any) -> Any:
        return listinput.as_lines(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> Any:
        try:
            return listinput.parse_lines(self.item_type, super().to_python(value))
        except listinput.LineError as exc:
            raise forms.ValidationError(str(exc)) from None


# What an optional input left to the tool reads as, whatever its type.
NOT_SET = "(not set)"


def focus_first_field(form: forms.Form) -> None:
    """A fresh run form puts focus in its first field: the page is there to fill it in."""
    for field in form.fields.values():
        if not field.widget.is_hidden:
            field.widget.attrs["autofocus"] = True
            return


def focus_first_error(form: forms.Form) -> None:
    """Autofocus the first field with an error, so a keyboard user lands where to fix it
    when the page comes back (not at the top, a skip link and a nav away)."""
    for name, field in form.fields.items():  # in page order
        if name in form.errors:
            field.widget.attrs["autofocus"] = True
            return


def file_object(upload) -> dict[str, Any]:
    """An upload as the file object the API takes (tools_app/manifest/input_files.py)."""
    if upload.size > input_files.MAX_FILE:
        raise forms.ValidationError(
            f"{upload.name}: the file is larger than {input_files.MAX_FILE // (1024 * 1024)} MiB."
        )
    data = b"".join(upload.chunks())
    return {
        "name": input_files.safe_name(upload.name or "file"),
        "mime_type": upload.content_type or "application/octet-stream",
        "data": base64.b64encode(data).decode("ascii"),
    }


class UploadField(forms.FileField):
    def clean(self, data: Any, initial: Any = None) -> Any:
        upload = super().clean(data, initial)
        return file_object(upload) if upload else None


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleUploadField(forms.FileField):
    def __init__(self, **kwargs) -> None:
        super().__init__(widget=MultipleFileInput(attrs={"multiple": True}), **kwargs)

    def clean(self, data: Any, initial: Any = None) -> Any:
        uploads = data if isinstance(data, list | tuple) else ([data] if data else [])
        if not uploads:
            if self.required:
                raise forms.ValidationError(self.error_messages["required"], code="required")
            return None
        return [file_object(super(MultipleUploadField, self).clean(u, initial)) for u in uploads]


def field_for(spec: InputSpec, initial: Any = None) -> forms.Field:
    """The form field of one input: its type, its default (or the value used last),
    its description as help. Sensitive inputs are password fields and never pre-filled."""
    required = not spec.optional and not spec.has_default
    value = spec.default if spec.has_default else None
    if initial is not None and not spec.sensitive:
        value = initial
    common: dict[str, Any] = {"label": spec.name, "help_text": spec.description}
    if spec.type == "string":
        widget = forms.PasswordInput(render_value=False) if spec.sensitive else forms.TextInput
        return forms.CharField(
            required=required,
            strip=False,  # a tool may care about leading spaces
            initial=None if spec.sensitive else value,
            widget=widget,
            **common,
        )
    if spec.type == "number":
        return forms.FloatField(required=required, initial=value, **common)
    if spec.type == "integer":
        return forms.IntegerField(required=required, initial=value, **common)
    if spec.type == "json":
        return JsonInputField(required=required, initial=value, **common)
    if spec.type.endswith("[]") and spec.type != "file[]":
        item_help = f"{spec.description} One {spec.type[:-2]} per line."
        return ListInputField(
            spec.type[:-2],
            required=required,
            initial=value,
            label=spec.name,
            help_text=item_help.strip(),
        )
    if spec.type == "file":
        return UploadField(required=required, **common)
    if spec.type == "file[]":
        return MultipleUploadField(required=required, **common)
    if spec.type == "boolean":
        if spec.optional and not spec.has_default:
            # Unset, yes or no: a checkbox could not say "leave it to the tool". Unset
            # reads as it does for an optional enum.
            field = forms.NullBooleanField(required=False, initial=value, **common)
            field.widget.choices = [("unknown", NOT_SET), ("true", "Yes"), ("false", "No")]
            return field
        return forms.BooleanField(required=False, initial=bool(value), **common)
    choices = [(v, v) for v in spec.values]
    if not required:
        choices = [("", NOT_SET), *choices]
    return forms.ChoiceField(choices=choices, required=required, initial=value, **common)


class RunForm(forms.Form):
    """A forms.Form whose fields are the tool's inputs, in manifest order (and nothing
    else: any other field name could collide with an input's)."""

    def __init__(
        self,
        *args,
        manifest: Manifest,
        last: dict[str, Any] | None = None,
        preset: frozenset[str] = frozenset(),
        withheld: frozenset[str] = frozenset(),
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.manifest = manifest
        self.preset = preset  # the presets this run gets
        last = last or {}
        for name, spec in manifest.inputs.items():
            if spec.visibility == "hidden":  # an integration fills it, never a person
                continue
            self.fields[name] = field = field_for(spec, last.get(name))
            if name in preset:
                # A person may type their own value; left empty, the admin's preset fills it.
                field.required = False
                field.initial = None
                field.help_text = f"{spec.description} Preset by an admin: leave empty to use it."
            elif name in withheld:
                field.help_text = (
                    f"{spec.description} An admin's sensitive preset is withheld from this "
                    "run (see above): type a value to use one."
                )

    def refuse_undecodable(self, names: set[str]) -> None:
        """`names` as posted: with a prefix (the editor's run panel), "run-NAME"."""
        for name in self.fields:
            if self.add_prefix(name) in names:
                self.add_error(name, NOT_UNICODE)

    def params(self) -> dict[str, Any]:
        """The cleaned values as a params object: unset optional inputs are left out,
        so the tool's own defaults apply."""
        params: dict[str, Any] = {}
        for name, spec in self.manifest.inputs.items():
            if name not in self.fields:
                continue
            value = self.cleaned_data.get(name)
            unset = value is None or (value == "" and spec.type in ("string", "enum"))
            if unset and (spec.optional or spec.has_default or name in self.preset):
                continue
            params[name] = value
        return params

    def add_param_errors(self, errors: list[str]) -> None:
        """Put each "name: message" from schema validation on its field."""
        for error in errors:
            name, _, message = error.partition(": ")
            if name in self.manifest.inputs:
                self.add_error(name, message)
            else:
                self.add_error(None, error)


class RawParamsForm(forms.Form):
    """The params as one JSON object, for inputs a form cannot express (or a paste).
    Its HTML form carries RAW_MODE_FIELD, a name no input can have (inputs match
    INPUT_NAME_RE, which has no hyphen)."""

    params = forms.CharField(
        label="Params (JSON)",
        required=False,
        strip=True,
        max_length=MAX_RAW_PARAMS,
        # static/src/params-editor.js makes it a JSON editor checked against the schema
        # in script#params-schema (raw_schema).
        widget=forms.Textarea(
            attrs={
                "rows": 8,
                "spellcheck": "false",
                "class": "code",
                "data-params-editor": "params-schema",
            }
        ),
        help_text='One JSON object, e.g. {"url": "https://example.com"}. Sensitive '
        "inputs typed here are masked in the run record like in the form.",
    )

    def clean_params(self) -> dict[str, Any]:
        value = parse_json_field(None, self.cleaned_data["params"] or "{}")
        if not isinstance(value, dict):
            raise forms.ValidationError('The params must be a JSON object: {"name": value}.')
        return value

    def add_param_errors(self, errors: list[str]) -> None:
        for error in errors:
            self.add_error("params", error)

    def refuse_undecodable(self, names: set[str]) -> None:
        if "params" in names:
            self.add_error("params", NOT_UNICODE)


def raw_schema(manifest: Manifest, preset: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The schema the raw JSON editor checks as you type: what a person may send
    (schema.input_schema for a caller), with `required` naming only what the run would
    miss. validate_params fills defaults first, and a preset fills an input left out.
    Defaults are left out: the editor needs none, and a sensitive input's is never shown."""
    caller = schema.input_schema(manifest, for_caller=True)
    for prop in caller["properties"].values():
        prop.pop("default", None)
    caller["required"] = [
        name
        for name in caller["required"]
        if not manifest.inputs[name].has_default and name not in preset
    ]
    return caller


def raw_initial(manifest: Manifest, values: dict[str, Any]) -> str:
    """The JSON shown in raw mode: the given values without sensitive ones."""
    shown = {
        name: value
        for name, value in values.items()
        if name in manifest.inputs
        and not manifest.inputs[name].sensitive
        and manifest.inputs[name].type not in input_files.FILE_TYPES  # names, not bytes
        and offerable(value)
    }
    return json.dumps(shown, indent=2, ensure_ascii=False)


# Agent tokens start runs too; the person filter names them "token:NAME", a prefix no
# username may carry (Django usernames allow no ":").
TOKEN_PREFIX = "token:"


class RunFilterForm(forms.Form):
    """The run history's filters (a GET form: every field is optional)."""

    tool = forms.CharField(required=False, max_length=64, widget=forms.Select)
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *RunStatus.choices])
    person = forms.CharField(required=False, max_length=250, widget=forms.Select)
    via = forms.ChoiceField(required=False, choices=[("", "Any way"), *RunVia.choices])

    def __init__(
        self, *args, tools: list[str] | None = None, people: list[str] | None = None, **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tool"].widget.choices = [("", "Any tool"), *((t, t) for t in tools or [])]
        self.fields["person"].widget.choices = [
            ("", "Anyone"),
            *(
                (
                    p,
                    f"agent token “{p.removeprefix(TOKEN_PREFIX)}”"
                    if p.startswith(TOKEN_PREFIX)
                    else p,
                )
                for p in people or []
            ),
        ]

    def clean_tool(self) -> str:
        # A name that cannot be a tool finds nothing; it is refused before the database.
        tool = self.cleaned_data["tool"]
        if tool and not NAME_RE.fullmatch(tool):
            raise forms.ValidationError("Not a tool name.")
        return tool

    def clean_person(self) -> str:
        person = self.cleaned_data["person"]
        username_field = get_user_model()._meta.get_field("username")
        if person.startswith(TOKEN_PREFIX):
            return person
        if person and len(person) > username_field.max_length:
            raise forms.ValidationError("Not a user name.")
        return person

    def filter(self, runs):
        data = self.cleaned_data
        if data.get("tool"):
            runs = runs.filter(tool__name=data["tool"])
        if data.get("status"):
            runs = runs.filter(status=data["status"])
        person = data.get("person") or ""
        if person.startswith(TOKEN_PREFIX):
            runs = runs.filter(token__name=person.removeprefix(TOKEN_PREFIX))
        elif person:
            runs = runs.filter(user__username=person)
        if data.get("via"):
            runs = runs.filter(via=data["via"])
        return runs

    @property
    def is_filtered(self) -> bool:
        return any(self.cleaned_data.get(k) for k in ("tool", "status", "person", "via"))
