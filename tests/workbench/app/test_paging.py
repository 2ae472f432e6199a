"""The one paging of the workbench's lists (`workbench.app.paging.PagedState`), which the
Decisions page and the Inbox share: pages from the total, the pager's bounds, and a changed
filter going back to page 1 with exactly one load."""

from __future__ import annotations

import param
import pytest

from workbench.app.paging import PagedState


class Listed(PagedState):
    """A paged list of `size` items that counts its loads."""

    kind = param.String(default="")

    def __init__(self, size: int, **params):
        self.size, self.loads = size, []
        super().__init__(**params)

    @param.depends("kind", watch=True)
    def _filters_changed(self) -> None:
        self.first_page()

    @param.depends("page", watch=True)
    def refresh(self) -> None:
        self.loads.append((self.kind, self.page))
        self.total = self.size


@pytest.mark.parametrize(("total", "size", "pages"), [(0, 25, 1), (1, 25, 1), (25, 25, 1), (26, 25, 2),
                                                       (11, 5, 3), (10, 5, 2)])
def test_pages_from_the_total(total, size, pages):
    listed = Listed(total, page_size=size)
    listed.refresh()
    assert listed.pages == pages


def test_the_pager_stays_within_the_pages():
    listed = Listed(11, page_size=5)
    listed.refresh()
    listed.previous_page()
    assert listed.page == 1
    listed.next_page(), listed.next_page(), listed.next_page()
    assert listed.page == 3 and listed.loads[-1] == ("", 3)
    listed.previous_page()
    assert listed.page == 2


def test_a_changed_filter_loads_page_one_once():
    listed = Listed(11, page_size=5)
    listed.refresh()
    listed.next_page()
    listed.loads.clear()
    listed.kind = "a"  # from page 2: back to page 1, loaded once (by the page's change)
    assert listed.page == 1 and listed.loads == [("a", 1)]
    listed.kind = "b"  # already on page 1: loaded again, once
    assert listed.loads == [("a", 1), ("b", 1)]


def test_a_list_that_cannot_load_says_so():
    with pytest.raises(NotImplementedError):
        PagedState().refresh()
