"""A list the workbench shows a page at a time (the Decisions page's decisions, the Inbox's holds):
the page, its size, the total and what a changed filter or a step of the pager does, once."""

from __future__ import annotations

import param


class PagedState(param.Parameterized):
    """The paging of a view-model whose `refresh` loads the current page (watching `page`) and sets
    `total`; a subclass calls `first_page` when one of its filters changes."""

    page = param.Integer(default=1, bounds=(1, None))
    page_size = param.Integer(default=25, bounds=(5, 200))
    total = param.Integer(default=0)

    @property
    def pages(self) -> int:
        """How many pages the total fills (at least one, an empty list's)."""
        return max(1, -(-self.total // self.page_size))

    def first_page(self) -> None:
        """A filter changed: back to page 1, which loads it, or load page 1 again when already on it."""
        if self.page != 1:
            self.page = 1
        else:
            self.refresh()

    def previous_page(self) -> None:
        self.page = max(1, self.page - 1)

    def next_page(self) -> None:
        self.page = min(self.pages, self.page + 1)

    def refresh(self) -> None:
        raise NotImplementedError("a paged view-model loads its current page")
