"""Small layout helpers shared by the pages (no state, no data access)."""

from __future__ import annotations

import panel as pn

from workbench.reports.textsafe import md_text


def note(message_param) -> pn.pane.Markdown:
    """A status line bound to a view-model's `message`, shown as text (messages quote caller
    text: decision ids, versions, refusals)."""
    return pn.pane.Markdown(pn.bind(md_text, message_param), css_classes=["wb-message"],
                            sizing_mode="stretch_width")


def json_pane(value_param, title: str) -> pn.Column:
    """A titled, collapsible JSON view of a view-model parameter (hidden while None)."""
    def render(value):
        if value is None or value == []:
            return pn.pane.Markdown(f"*{title}: nothing yet*")
        return pn.Column(f"**{title}**", pn.pane.JSON(value, depth=2, sizing_mode="stretch_width"))

    return pn.Column(pn.bind(render, value_param), sizing_mode="stretch_width")
