"""Small layout helpers shared by the pages (no state, no data access)."""

from __future__ import annotations

from typing import Any

import panel as pn
import param

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
