"""The Rulebook v1 tests' fixtures (`build`, `evaluate`, `matches`, defined in `rulebook_support`)
for every test module here: pytest finds fixtures in a conftest without each module importing
them by name, an import a linter reads as a name the test's parameter then redefines (F811)."""

from rulebook_support import build, evaluate, matches  # noqa: F401 (the fixtures)
