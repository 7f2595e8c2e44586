"""Run port blocks: chosen free, and below the kernel's ephemeral ports (where an outgoing connection's source port
could take a block's port before a step binds it)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from orchestrator import ports


@pytest.mark.parametrize(("ephemeral", "expected"), [
    ("32768\t60999\n", (20000, 32768)),   # Linux's default
    ("40000 65000", (20000, 40000)),
    ("20500 65000", (20000, 60000)),     # too little room below: the old span
    ("garbage", (20000, 32768)),
])
def test_blocks_come_from_below_the_ephemeral_range(tmp_path: Path, ephemeral: str, expected: tuple[int, int]) -> None:
    conf = tmp_path / "ip_local_port_range"
    conf.write_text(ephemeral)
    assert ports.port_range(conf) == expected


def test_a_missing_range_file_means_the_default(tmp_path: Path) -> None:
    assert ports.port_range(tmp_path / "absent") == (20000, 32768)


def test_a_chosen_block_is_free_and_inside_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))  # a port nobody else holds, and its block around it
        busy.listen()
        taken = busy.getsockname()[1] - busy.getsockname()[1] % ports.PORT_BLOCK
        low, high = taken - 2 * ports.PORT_BLOCK, taken + 2 * ports.PORT_BLOCK  # four blocks, one busy
        monkeypatch.setattr(ports, "port_range", lambda: (low, high))
        bases = {ports.free_port_base() for _ in range(40)}
    assert bases and taken not in bases
    assert all(b >= low and b + ports.PORT_BLOCK <= high and b % ports.PORT_BLOCK == 0 for b in bases)
