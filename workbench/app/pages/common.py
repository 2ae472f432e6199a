"""Small layout helpers shared by the pages (no state, no data access)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import panel as pn
import param

from gate.strict_json import JsonValue
from workbench.reports.textsafe import md_text


def note(message_param: param.Parameter[str]) -> pn.pane.Markdown:
    """A status line bound to a view-model's `message`, shown as text (messages quote caller
    text: decision ids, versions, refusals)."""
    return pn.pane.Markdown(pn.bind(md_text, message_param), css_classes=["wb-message"],
                            sizing_mode="stretch_width")


def json_pane(value_param: param.Parameter[Any], title: str) -> pn.Column:
    """A titled, collapsible JSON view of a view-model parameter (hidden while None)."""
    def render(value: Any) -> pn.viewable.Viewable:
        if value is None or value == []:
            return pn.pane.Markdown(f"*{title}: nothing yet*")
        return pn.Column(f"**{title}**", pn.pane.JSON(value, depth=2, sizing_mode="stretch_width"))

    return pn.Column(pn.bind(render, value_param), sizing_mode="stretch_width")


def confirmation_box(proposal: param.Parameter[Any], text: Callable[[], str], confirm: Callable[[], None],
                     cancel: Callable[[], None], name: str) -> pn.Column:
    """The confirmation of a move that changes production: `text()` (plain text, one line per
    item, escaped here) with Confirm and Cancel, shown while the view-model's `proposal` is set."""
    yes = pn.widgets.Button(name="Confirm", button_type="danger", css_classes=[f"{name}-confirm"])
    no = pn.widgets.Button(name="Cancel", css_classes=[f"{name}-cancel"])
    yes.on_click(lambda _: confirm())
    no.on_click(lambda _: cancel())

    def box(value: dict[str, JsonValue] | None) -> pn.viewable.Viewable:
        if not value:
            return pn.Spacer(height=0)
        lines = "\n".join(f"- {md_text(line)}" for line in text().split("\n"))
        return pn.Column(pn.pane.Markdown(lines, css_classes=[f"{name}-confirmation"]), pn.Row(yes, no),
                         styles={"border": "2px solid #d9534f", "padding": "4px"})

    return pn.Column(pn.bind(box, proposal))
