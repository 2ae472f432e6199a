"""Renderers of computed, serializable results (HTML with inline SVG plots, Markdown)."""
