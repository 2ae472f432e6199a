"""Hypothesis helpers shared by the tamper tests."""

from __future__ import annotations

from hypothesis import strategies as st


def one_character_edit(data, text: str) -> str:
    """`text` with one character replaced, inserted or deleted (always a different string)."""
    operation = data.draw(st.sampled_from(["replace", "insert", "delete"]) if text else st.just("insert"))
    if operation == "delete":
        index = data.draw(st.integers(0, len(text) - 1), label="index")
        return text[:index] + text[index + 1:]
    index = data.draw(st.integers(0, len(text) - (1 if operation == "replace" else 0)), label="index")
    char = data.draw(st.characters(), label="char")
    if operation == "replace":
        if char == text[index]:
            char = "x" if text[index] != "x" else "y"
        return text[:index] + char + text[index + 1:]
    return text[:index] + char + text[index:]
