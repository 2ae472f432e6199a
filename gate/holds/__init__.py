"""Held actions (issue 43, docs/holds.md): the owner of a `review` verdict, its deadline, and the
signed resolution that alone lets the caller proceed. Pure core: the policy (`policy`) and the
events that record and verify every step (`events`)."""
