"""Safeguard settings, pure: the one table of what each setting is and what weakens it (issue 52)."""
