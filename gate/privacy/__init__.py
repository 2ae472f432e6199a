"""Personal data: the one data map (what a member is, whose it is) and masking per destination (issue 67)."""
