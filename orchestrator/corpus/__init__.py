"""Built corpora of frozen incidents: their layout, build and dataset card (docs/generation.md)."""
