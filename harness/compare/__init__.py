"""`harness compare` and `harness bisect`: head against base, bytes and speed (docs/COMPARE.md)."""
