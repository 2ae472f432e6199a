"""View-models: one `param.Parameterized` class per page, holding selections and results.

They call the store and nothing else, never touch widgets, and are tested without a browser
(tests/workbench/app). Long work runs off the server's event loop (`asyncio.to_thread` in the
pages), so a page never freezes while a dry-run or an export runs.
"""
