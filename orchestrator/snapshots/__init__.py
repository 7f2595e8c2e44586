"""Frozen incidents: a live run recorded at handover as a snapshot, replayed to any number of agents.

    format.py             the snapshot layout, snapshot.json, verify()
    archive.py            export to / import from one .tar.gz (or .tar.xz)
    frozen_prometheus.py  a real Prometheus serving a snapshot's TSDB (replay), and rewrite_without (record)
    capture.py            the capture program roles/snapshot_record runs at handover
    leaks.py              search a snapshot for strings that must never be in it (ground truth)

See docs/snapshots.md.
"""
