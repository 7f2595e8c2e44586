"""FinOps: a seeded FOCUS billing-data generator with planted anomalies, the read-only SQL tool, a reference
anomaly detector and the reference queries of the data-insight scenarios. See docs/finops.md."""
