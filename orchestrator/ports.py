"""Loopback port blocks: each run gets PORT_BLOCK consecutive ports (its gateway, proxies, the frozen Prometheus),
chosen once when the run is created and kept in its state so every step and `opsbench cleanup` agree on them."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

PORT_BLOCK = 10
PORT_RANGE_LOW = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def port_range(ephemeral: Path = EPHEMERAL_RANGE) -> tuple[int, int]:
    """Where run port blocks are taken: from PORT_RANGE_LOW up to the kernel's ephemeral ports. A port in the ephemeral
    range can become any outgoing connection's source port (Prometheus' scrapes, the load generator) between the
    moment a block is chosen and the moment a step binds it (a trial's gateway, minutes later on a kept
    environment): a bind then fails. Below the range, only another listener can take it. Where the ephemeral range
    starts too low to leave room (a tuned kernel), the whole span up to 60000 is used, as before."""
    try:
        low = int(ephemeral.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return (PORT_RANGE_LOW, low) if low - PORT_RANGE_LOW >= 100 * PORT_BLOCK else (PORT_RANGE_LOW, 60000)


def free_port_base(tries: int = 200) -> int:
    """A block of PORT_BLOCK loopback ports that are free right now (in `port_range`)."""
    rng = secrets.SystemRandom()
    low, high = port_range()
    for _ in range(tries):
        base = rng.randrange(low, high - PORT_BLOCK + 1, PORT_BLOCK)
        try:
            for port in range(base, base + PORT_BLOCK):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free block of loopback ports found")
