"""Submit a page's forms the way a browser does: the data comes from the rendered HTML, so
a control the template forgot (or names wrongly) breaks the test, as it breaks the page."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

from django.test import Client


@dataclass
class Form:
    attrs: dict[str, str]
    # What a browser submits: successful controls, in document order.
    fields: list[tuple[str, str]] = field(default_factory=list)
    # Every named control, unchecked boxes and file inputs included: what a user may fill.
    controls: dict[str, str] = field(default_factory=dict)
    # Submit buttons: their text and attributes (a named one sends name=value).
    buttons: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def button(self, text: str) -> dict[str, str]:
        found = [attrs for label, attrs in self.buttons if label == text]
        assert len(found) == 1, f"{len(found)} buttons say {text!r}"
        return found[0]

    def filled(self, changes: dict | None = None) -> dict[str, str | list[str]]:
        """What the form submits once a person has made `changes` (None unchecks a box or
        leaves a field out): only controls the page renders may be filled."""
        data = self.data()
        for name, value in (changes or {}).items():
            assert name in self.controls, f"the form has no control named {name!r}"
            if value is None:
                data.pop(name, None)
            else:
                data[name] = value
        return data

    def data(self) -> dict[str, str | list[str]]:
        data: dict[str, str | list[str]] = {}
        for name, value in self.fields:
            if name in data:
                previous = data[name]
                data[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
            else:
                data[name] = value
        return data


class _FormsParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._form: Form | None = None
        self._textarea: str | None = None
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []
        self._option: dict[str, str] | None = None
        self._text: list[str] = []
        self._button: list[str] | None = None
        self._button_attrs: dict[str, str] = {}
        self._button_form: Form | None = None
        self._textarea_form: Form | None = None
        self._select_form: Form | None = None

    def _owner(self, a: dict[str, str]) -> Form | None:
        """The form a control belongs to: the one its `form` attribute names (anywhere on
        the page before it, as the editor's run panel uses it), else the enclosing one."""
        if "form" in a:
            return next((f for f in self.forms if f.attrs.get("id") == a["form"]), None)
        return self._form

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._form = Form(attrs=a)
            self.forms.append(self._form)
            return
        form = self._select_form if tag == "option" else self._owner(a)
        if form is None:
            return
        if tag == "button" and a.get("type", "submit") == "submit":
            self._button = []
            self._button_attrs = a
            self._button_form = form
        if tag == "input" and a.get("type") == "submit" and "disabled" not in a:
            # <input type="submit" value="…"> is a button too (Django admin's are).
            form.buttons.append((" ".join(a.get("value", "Submit").split()), a))
        if tag == "input" and a.get("name") and "disabled" not in a:
            kind = a.get("type", "text")
            form.controls[a["name"]] = kind
            if kind in ("submit", "button", "image", "reset", "file"):
                return
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            form.fields.append((a["name"], a.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "textarea" and a.get("name"):
            form.controls[a["name"]] = "textarea"
            self._textarea = a["name"]
            self._textarea_form = form
            self._text = []
        elif tag == "select" and a.get("name"):
            form.controls[a["name"]] = "select"
            self._select = a["name"]
            self._select_form = form
            self._options = []
        elif tag == "option" and self._select is not None:
            self._option = a
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._textarea is not None or self._option is not None:
            self._text.append(data)
        if self._button is not None:
            self._button.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "button" and self._button is not None and self._button_form is not None:
            text = " ".join("".join(self._button).split())
            self._button_form.buttons.append((text, self._button_attrs))
            self._button = None
        elif tag == "textarea" and self._textarea is not None and self._textarea_form is not None:
            form = self._textarea_form
            text = "".join(self._text)
            # HTML drops one newline right after <textarea>; browsers submit CRLF breaks.
            text = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\n")
            form.fields.append((self._textarea, text.replace("\n", "\r\n")))
            self._textarea = None
        elif tag == "option" and self._option is not None:
            value = self._option.get("value", "".join(self._text).strip())
            self._options.append((value, "selected" in self._option))
            self._option = None
        elif tag == "select" and self._select is not None and self._select_form is not None:
            form = self._select_form
            chosen = [v for v, selected in self._options if selected] or [
                v for v, _ in self._options[:1]
            ]
            form.fields.extend((self._select, v) for v in chosen[:1])
            self._select = None
        elif tag == "form":
            self._form = None


def forms_of(html: str) -> list[Form]:
    parser = _FormsParser()
    parser.feed(html)
    return parser.forms


def find_form(html: str, *, form_id: str | None = None, action: str | None = None,
              button: str | None = None) -> Form:  # fmt: skip
    """The one form with that id, action attribute or submit button text."""
    found = [
        f
        for f in forms_of(html)
        if (form_id is None or f.attrs.get("id") == form_id)
        and (action is None or f.attrs.get("action") == action)
        and (button is None or any(text == button for text, _ in f.buttons))
    ]
    assert len(found) == 1, f"{len(found)} forms match id={form_id} action={action} {button=}"
    return found[0]


def form_data(html: str, form_id: str = "tool-form") -> dict[str, str | list[str]]:
    data = find_form(html, form_id=form_id).data()
    assert data, f"form #{form_id} has no fields"
    return data


def submit(
    client: Client,
    page: str,
    changes: dict | None = None,
    *,
    form_id: str | None = None,
    action: str | None = None,
    button: str | None = None,
    **post_kwargs,
):
    """GET the page, fill in its form as a person would (only controls the page renders
    may be filled: a name it does not render fails the test), press `button` (or just
    submit) and POST where the form (or that button) posts to. A change to None unchecks a
    box or leaves a field out."""
    response = client.get(page)
    assert response.status_code == 200, f"GET {page}: {response.status_code}"
    form = find_form(response.content.decode(), form_id=form_id, action=action, button=button)
    data = form.filled(changes)
    pressed = form.button(button) if button is not None else {}
    enctype = pressed.get("formenctype") or form.attrs.get("enctype")
    if enctype != "multipart/form-data":
        # Without multipart encoding a browser sends a chosen file's name, not its content.
        data = {k: getattr(v, "name", v) if hasattr(v, "read") else v for k, v in data.items()}
    target = pressed.get("formaction") or form.attrs.get("action") or page
    if pressed.get("name"):
        data[pressed["name"]] = pressed.get("value", "")
    return client.post(target, data, **post_kwargs)


def link(html: str, text: str) -> str:
    """The href of the one link whose text is `text` (tags inside it ignored), unescaped:
    a destructive action is a link to its confirm page, whose form then acts."""
    import html as html_module
    import re

    found = [
        html_module.unescape(href)
        for href, inner in re.findall(r'<a\b[^>]*\bhref="([^"]*)"[^>]*>(.*?)</a>', html, re.S)
        if " ".join(re.sub(r"<[^>]+>", "", inner).split()) == text
    ]
    assert len(found) == 1, f"{len(found)} links say {text!r}"
    return found[0]
