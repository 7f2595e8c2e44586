"""Filter: does a list of active alerts (their label dicts) match what a check expects?"""


def opsbench_alerts_match(active, firing, quiet, ignore=()):
    """With quiet: True when no active alert other than the ignored names.

    Otherwise: True when every matcher in ``firing`` (a dict of labels) equals the labels of
    at least one active alert on every key it gives.
    """
    if quiet:
        return not [a for a in active if a.get("alertname") not in set(ignore)]
    return all(any(all(a.get(k) == v for k, v in m.items()) for a in active) for m in firing)


class FilterModule:
    def filters(self):
        return {"opsbench_alerts_match": opsbench_alerts_match}
