"""Filters that build the iptables rules of network faults (arguments for opsbench_netfilter)."""


def opsbench_dnat_rule(pair, proxy_ip, port):
    """(target ip, proxy port) -> a nat OUTPUT rule sending connections to target:port to the proxy."""
    target_ip, proxy_port = pair
    return {"table": "nat", "chain": "OUTPUT",
            "args": ["-p", "tcp", "-d", target_ip, "--dport", str(port), "-j", "DNAT",
                     "--to-destination", f"{proxy_ip}:{proxy_port}"]}


def opsbench_drop_rule(source_ip, probability=1.0):
    """A filter INPUT rule dropping packets from source_ip (all of them, or at random)."""
    args = ["-s", source_ip]
    if float(probability) < 1.0:
        args += ["-m", "statistic", "--mode", "random", "--probability", f"{float(probability):.4f}"]
    return {"table": "filter", "chain": "INPUT", "args": [*args, "-j", "DROP"]}


def opsbench_size_drop_rule(source_ip, max_bytes, port=8080):
    """A filter INPUT rule dropping the TCP packets from source_ip:port longer than max_bytes (IP length): a path-MTU
    black hole on that path, seen from the receiver."""
    return {"table": "filter", "chain": "INPUT",
            "args": ["-s", source_ip, "-p", "tcp", "--sport", str(int(port)), "-m", "length", "--length",
                     f"{int(max_bytes) + 1}:65535", "-j", "DROP"]}


class FilterModule:
    def filters(self):
        return {"opsbench_dnat_rule": opsbench_dnat_rule, "opsbench_drop_rule": opsbench_drop_rule,
                "opsbench_size_drop_rule": opsbench_size_drop_rule}
