"""The workbench store's parts, one per page (issue 66, item 6): what the Overview reads
(`overview`), the Decisions page's lists and records (`decisions`), the Migration and Authoring
pages' runs over history (`migration`) and the Inbox's held actions (`holds`). Each is given the
one `WorkbenchStore` (its services, ledger and dataset caches) and is reached through it."""
