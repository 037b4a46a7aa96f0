"""Reading a portal page as a browser would, for tests with Django's client: what a form sends as it stands
and which choices a menu offers (with the standard library's parser: no dependency for it)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any


class _Forms(HTMLParser):
    """Every form of a page: its id, the values it would send, and each select's options."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[dict[str, Any]] = []
        self._select: str | None = None
        self._option: dict[str, Any] | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"id": a.get("id", ""), "values": {}, "options": {}})
        if not self.forms:
            return
        form = self.forms[-1]
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    form["values"][name] = a.get("value", "on")
            elif kind not in ("submit", "button"):
                form["values"][name] = a.get("value", "")
        elif tag == "select" and name:
            self._select = name
            form["options"][name] = []
        elif tag == "option" and self._select:
            self._option = {"value": a.get("value"), "selected": "selected" in a, "label": ""}
            form["options"][self._select].append(self._option)
        elif tag == "textarea" and name:
            self._textarea = name
            form["values"][name] = ""

    def handle_data(self, data: str) -> None:
        if self._option is not None:
            self._option["label"] += data
        if self._textarea is not None:
            self.forms[-1]["values"][self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "option" and self._option is not None:
            if self._option["value"] is None:
                self._option["value"] = self._option["label"].strip()
            self._option = None
        elif tag == "select" and self._select:
            options = self.forms[-1]["options"][self._select]
            chosen = [o for o in options if o["selected"]] or options[:1]
            if chosen:
                self.forms[-1]["values"][self._select] = chosen[0]["value"]
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def form(page: str | bytes, form_id: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The values the form `form_id` sends as it stands, and the option values of each of its menus."""
    parser = _Forms()
    parser.feed(page.decode() if isinstance(page, bytes) else page)
    for found in parser.forms:
        if found["id"] == form_id:
            options = {name: [o["value"] for o in opts] for name, opts in found["options"].items()}
            return found["values"], options
    raise AssertionError(f"the page has no form #{form_id}")
