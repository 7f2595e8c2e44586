"""The scripted monitoring agent (orchestrator/agents/devops_monitor.py): its parsing and its decision, on samples
recorded live in the workspace container (tests/e2e/test_devops_monitoring.py runs the same against live processes).

RECORDED holds, per anomaly, the first and the last of the agent's three samples taken right after the scenario's
manifestation check passed (fault_workspace_process, the seven services, one misbehaving), reduced to the fields the
decision reads: per process (pid, ppid, stat, nlwp, rss KiB, etimes, comm, open descriptors, CPU ticks, wchar,
write_bytes), the zombies as a count per parent, and the regular files the processes held open. `as_text` writes
them back in the sampler's format, so every test goes through the parser too. Fast: no container, no gateway.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.agents import devops_monitor as dm
from orchestrator.evaluation.diagnosis import score_diagnosis
from orchestrator.evaluation.outputs import load_output
from orchestrator.role_topology import load_topology

SPECS = Path(__file__).resolve().parents[2] / "scenario_specs"
BAD = {"memory_leak": "report-indexer", "cpu_spin": "event-relay", "fd_leak": "cache-warmer",
       "disk_fill": "metrics-agent", "zombie_storm": "log-shipper", "io_hog": "job-runner",
       "thread_explosion": "backup-sync"}

Row = tuple[int, int, str, int, int, int, str, int, int, int, int]

RECORDED: dict[str, dict[str, Any]] = {
    'memory_leak': {
        "samples": [
            (61590.69, {}, [
                (1, 0, 'Ss', 1, 684, 913, 'podman-init', 4, 2, 350280831, 121053184),
                (6, 1, 'S', 1, 1652, 913, 'sleep', 3, 0, 0, 0),
                (5614, 1, 'Ss', 1, 14332, 9, 'backup-sync', 4, 2, 118, 8192),
                (5618, 1, 'Ss', 1, 14380, 9, 'cache-warmer', 4, 2, 118, 12288),
                (5622, 1, 'Ss', 1, 14548, 9, 'event-relay', 4, 2, 118, 12288),
                (5626, 1, 'Ss', 1, 14276, 9, 'job-runner', 4, 2, 118, 12288),
                (5630, 1, 'Ss', 1, 14272, 9, 'log-shipper', 4, 1, 118, 12288),
                (5634, 1, 'Ss', 1, 14472, 9, 'metrics-agent', 4, 1, 118, 16384),
                (5638, 1, 'Ss', 1, 295824, 9, 'report-indexer', 4, 17, 28, 16384),
            ]),
            (61595.0, {}, [
                (1, 0, 'Ss', 1, 684, 917, 'podman-init', 4, 2, 350280831, 121053184),
                (6, 1, 'S', 1, 1652, 917, 'sleep', 3, 0, 0, 0),
                (5614, 1, 'Ss', 1, 14332, 13, 'backup-sync', 4, 2, 118, 8192),
                (5618, 1, 'Ss', 1, 14380, 13, 'cache-warmer', 4, 2, 169, 20480),
                (5622, 1, 'Ss', 1, 14548, 13, 'event-relay', 4, 2, 118, 12288),
                (5626, 1, 'Ss', 1, 14276, 13, 'job-runner', 4, 2, 169, 16384),
                (5630, 1, 'Ss', 1, 14272, 13, 'log-shipper', 4, 1, 169, 20480),
                (5634, 1, 'Ss', 1, 14472, 13, 'metrics-agent', 4, 1, 169, 24576),
                (5638, 1, 'Ss', 1, 343112, 13, 'report-indexer', 4, 20, 67, 24576),
            ]),
        ],
        "files": [
            (5614, 118, '/home/dev/.local/share/services/var/backup-sync/backup-sync.log'),
            (5618, 169, '/home/dev/.local/share/services/var/cache-warmer/cache-warmer.log'),
            (5622, 118, '/home/dev/.local/share/services/var/event-relay/event-relay.log'),
            (5626, 169, '/home/dev/.local/share/services/var/job-runner/job-runner.log'),
            (5630, 169, '/home/dev/.local/share/services/var/log-shipper/log-shipper.log'),
            (5634, 169, '/home/dev/.local/share/services/var/metrics-agent/metrics-agent.log'),
            (5638, 67, '/home/dev/.local/share/services/var/report-indexer/report-indexer.log'),
        ],
    },
    'cpu_spin': {
        "samples": [
            (61602.46, {}, [
                (1, 0, 'Ss', 1, 684, 925, 'podman-init', 4, 2, 350282041, 121196544),
                (6, 1, 'S', 1, 1652, 925, 'sleep', 3, 0, 0, 0),
                (5846, 1, 'Ss', 1, 14268, 2, 'backup-sync', 4, 1, 79, 4096),
                (5850, 1, 'Ss', 1, 14272, 2, 'cache-warmer', 4, 2, 79, 8192),
                (5854, 1, 'Rs', 1, 14320, 2, 'event-relay', 4, 168, 28, 8192),
                (5858, 1, 'Ss', 1, 14124, 2, 'job-runner', 4, 1, 79, 8192),
                (5862, 1, 'Ss', 1, 14172, 2, 'log-shipper', 4, 2, 79, 8192),
                (5866, 1, 'Ss', 1, 14524, 2, 'metrics-agent', 4, 1, 79, 8192),
                (5870, 1, 'Ss', 1, 14360, 2, 'report-indexer', 4, 1, 79, 8192),
            ]),
            (61606.85, {}, [
                (1, 0, 'Ss', 1, 684, 929, 'podman-init', 4, 2, 350282041, 121196544),
                (6, 1, 'S', 1, 1652, 929, 'sleep', 3, 0, 0, 0),
                (5846, 1, 'Ss', 1, 14280, 7, 'backup-sync', 4, 1, 118, 8192),
                (5850, 1, 'Ss', 1, 14276, 7, 'cache-warmer', 4, 2, 118, 8192),
                (5854, 1, 'Rs', 1, 14320, 7, 'event-relay', 4, 471, 28, 8192),
                (5858, 1, 'Ss', 1, 14136, 7, 'job-runner', 4, 1, 118, 8192),
                (5862, 1, 'Ss', 1, 14184, 7, 'log-shipper', 4, 2, 118, 8192),
                (5866, 1, 'Ss', 1, 14528, 7, 'metrics-agent', 4, 1, 118, 8192),
                (5870, 1, 'Ss', 1, 14368, 7, 'report-indexer', 4, 1, 118, 8192),
            ]),
        ],
        "files": [
            (5846, 118, '/home/dev/.local/share/services/var/backup-sync/backup-sync.log'),
            (5850, 118, '/home/dev/.local/share/services/var/cache-warmer/cache-warmer.log'),
            (5854, 28, '/home/dev/.local/share/services/var/event-relay/event-relay.log'),
            (5858, 118, '/home/dev/.local/share/services/var/job-runner/job-runner.log'),
            (5862, 118, '/home/dev/.local/share/services/var/log-shipper/log-shipper.log'),
            (5866, 118, '/home/dev/.local/share/services/var/metrics-agent/metrics-agent.log'),
            (5870, 118, '/home/dev/.local/share/services/var/report-indexer/report-indexer.log'),
        ],
    },
    'fd_leak': {
        "samples": [
            (61618.6, {}, [
                (1, 0, 'Ss', 1, 684, 941, 'podman-init', 4, 2, 350282879, 121253888),
                (6, 1, 'S', 1, 1652, 941, 'sleep', 3, 0, 0, 0),
                (6027, 1, 'Ss', 1, 14084, 6, 'backup-sync', 4, 1, 79, 4096),
                (6031, 1, 'Ss', 1, 17296, 6, 'cache-warmer', 607, 8, 28, 4096),
                (6035, 1, 'Ss', 1, 14312, 6, 'event-relay', 4, 2, 79, 4096),
                (6039, 1, 'Ss', 1, 14380, 6, 'job-runner', 4, 2, 118, 4096),
                (6043, 1, 'Ss', 1, 14272, 6, 'log-shipper', 4, 2, 118, 8192),
                (6047, 1, 'Ss', 1, 14496, 6, 'metrics-agent', 4, 1, 118, 4096),
                (6051, 1, 'Ss', 1, 14188, 6, 'report-indexer', 4, 1, 118, 4096),
            ]),
            (61622.87, {}, [
                (1, 0, 'Ss', 1, 684, 945, 'podman-init', 4, 2, 350282879, 121253888),
                (6, 1, 'S', 1, 1652, 945, 'sleep', 3, 0, 0, 0),
                (6027, 1, 'Ss', 1, 14096, 10, 'backup-sync', 4, 1, 118, 4096),
                (6031, 1, 'Ss', 1, 17796, 10, 'cache-warmer', 704, 8, 65, 4096),
                (6035, 1, 'Ss', 1, 14324, 10, 'event-relay', 4, 2, 118, 4096),
                (6039, 1, 'Ss', 1, 14380, 10, 'job-runner', 4, 2, 169, 4096),
                (6043, 1, 'Ss', 1, 14272, 10, 'log-shipper', 4, 2, 169, 8192),
                (6047, 1, 'Ss', 1, 14496, 10, 'metrics-agent', 4, 2, 169, 4096),
                (6051, 1, 'Ss', 1, 14188, 10, 'report-indexer', 4, 2, 169, 4096),
            ]),
        ],
        "files": [
            (6027, 118, '/home/dev/.local/share/services/var/backup-sync/backup-sync.log'),
            (6031, 65, '/home/dev/.local/share/services/var/cache-warmer/cache-warmer.log'),
            (6031, 0, '/home/dev/.local/share/services/var/cache-warmer/segments.idx'),
            (6035, 118, '/home/dev/.local/share/services/var/event-relay/event-relay.log'),
            (6039, 169, '/home/dev/.local/share/services/var/job-runner/job-runner.log'),
            (6043, 169, '/home/dev/.local/share/services/var/log-shipper/log-shipper.log'),
            (6047, 169, '/home/dev/.local/share/services/var/metrics-agent/metrics-agent.log'),
            (6051, 169, '/home/dev/.local/share/services/var/report-indexer/report-indexer.log'),
        ],
    },
    'disk_fill': {
        "samples": [
            (61635.27, {}, [
                (1, 0, 'Ss', 1, 684, 957, 'podman-init', 4, 2, 350283856, 121286656),
                (6, 1, 'S', 1, 1652, 957, 'sleep', 3, 0, 0, 0),
                (6259, 1, 'Ss', 1, 14228, 7, 'backup-sync', 4, 2, 118, 8192),
                (6263, 1, 'Ss', 1, 14268, 7, 'cache-warmer', 4, 1, 118, 12288),
                (6267, 1, 'Ss', 1, 14184, 7, 'event-relay', 4, 2, 118, 12288),
                (6271, 1, 'Ss', 1, 14284, 7, 'job-runner', 4, 2, 118, 12288),
                (6275, 1, 'Ss', 1, 14264, 7, 'log-shipper', 4, 1, 118, 12288),
                (6279, 1, 'Ss', 1, 15352, 7, 'metrics-agent', 5, 12, 187695132, 12288),
                (6283, 1, 'Ss', 1, 14236, 7, 'report-indexer', 4, 2, 118, 12288),
            ]),
            (61639.57, {}, [
                (1, 0, 'Ss', 1, 684, 962, 'podman-init', 4, 2, 350283856, 121286656),
                (6, 1, 'S', 1, 1652, 962, 'sleep', 3, 0, 0, 0),
                (6259, 1, 'Ss', 1, 14228, 11, 'backup-sync', 4, 2, 118, 8192),
                (6263, 1, 'Ss', 1, 14268, 11, 'cache-warmer', 4, 1, 169, 16384),
                (6267, 1, 'Ss', 1, 14184, 11, 'event-relay', 4, 2, 118, 12288),
                (6271, 1, 'Ss', 1, 14284, 11, 'job-runner', 4, 2, 169, 16384),
                (6275, 1, 'Ss', 1, 14264, 11, 'log-shipper', 4, 1, 169, 16384),
                (6279, 1, 'Ss', 1, 15352, 11, 'metrics-agent', 5, 14, 230686783, 16384),
                (6283, 1, 'Ss', 1, 14236, 11, 'report-indexer', 4, 2, 169, 16384),
            ]),
        ],
        "files": [
            (6259, 118, '/home/dev/.local/share/services/var/backup-sync/backup-sync.log'),
            (6263, 169, '/home/dev/.local/share/services/var/cache-warmer/cache-warmer.log'),
            (6267, 118, '/home/dev/.local/share/services/var/event-relay/event-relay.log'),
            (6271, 169, '/home/dev/.local/share/services/var/job-runner/job-runner.log'),
            (6275, 169, '/home/dev/.local/share/services/var/log-shipper/log-shipper.log'),
            (6279, 63, '/home/dev/.local/share/services/var/metrics-agent/metrics-agent.log'),
            (6279, 230686720, '/tmp/services/metrics-agent/spool/batch-0001.dat'),
            (6283, 169, '/home/dev/.local/share/services/var/report-indexer/report-indexer.log'),
        ],
    },
    'zombie_storm': {
        "samples": [
            (61650.42, {6530: 100}, [
                (1, 0, 'Ss', 1, 684, 973, 'podman-init', 4, 2, 580971680, 121393152),
                (6, 1, 'S', 1, 1652, 973, 'sleep', 3, 0, 0, 0),
                (6514, 1, 'Ss', 1, 14384, 5, 'backup-sync', 4, 2, 79, 4096),
                (6518, 1, 'Ss', 1, 14264, 5, 'cache-warmer', 4, 2, 79, 4096),
                (6522, 1, 'Ss', 1, 14176, 5, 'event-relay', 4, 2, 79, 4096),
                (6526, 1, 'Ss', 1, 14244, 5, 'job-runner', 4, 2, 118, 8192),
                (6530, 1, 'Ss', 1, 14592, 5, 'log-shipper', 4, 7, 28, 8192),
                (6534, 1, 'Ss', 1, 14392, 5, 'metrics-agent', 4, 1, 118, 4096),
                (6538, 1, 'Ss', 1, 14096, 5, 'report-indexer', 4, 2, 118, 4096),
            ]),
            (61654.74, {6530: 100}, [
                (1, 0, 'Ss', 1, 684, 977, 'podman-init', 4, 2, 580971680, 121393152),
                (6, 1, 'S', 1, 1652, 977, 'sleep', 3, 0, 0, 0),
                (6514, 1, 'Ss', 1, 14396, 9, 'backup-sync', 4, 2, 118, 4096),
                (6518, 1, 'Ss', 1, 14268, 9, 'cache-warmer', 4, 2, 118, 4096),
                (6522, 1, 'Ss', 1, 14188, 9, 'event-relay', 4, 2, 118, 4096),
                (6526, 1, 'Ss', 1, 14244, 9, 'job-runner', 4, 2, 169, 8192),
                (6530, 1, 'Ss', 1, 14592, 9, 'log-shipper', 4, 7, 68, 8192),
                (6534, 1, 'Ss', 1, 14392, 9, 'metrics-agent', 4, 1, 169, 4096),
                (6538, 1, 'Ss', 1, 14096, 9, 'report-indexer', 4, 2, 169, 4096),
            ]),
        ],
        "files": [
            (6514, 118, '/home/dev/.local/share/services/var/backup-sync/backup-sync.log'),
            (6518, 118, '/home/dev/.local/share/services/var/cache-warmer/cache-warmer.log'),
            (6522, 118, '/home/dev/.local/share/services/var/event-relay/event-relay.log'),
            (6526, 169, '/home/dev/.local/share/services/var/job-runner/job-runner.log'),
            (6530, 68, '/home/dev/.local/share/services/var/log-shipper/log-shipper.log'),
            (6534, 169, '/home/dev/.local/share/services/var/metrics-agent/metrics-agent.log'),
            (6538, 169, '/home/dev/.local/share/services/var/report-indexer/report-indexer.log'),
        ],
    },
    'io_hog': {
        "samples": [
            (61662.64, {}, [
                (1, 0, 'Ss', 1, 684, 985, 'podman-init', 4, 3, 580972711, 121430016),
                (6, 1, 'S', 1, 1652, 985, 'sleep', 3, 0, 0, 0),
                (6840, 1, 'Ss', 1, 14220, 3, 'backup-sync', 4, 2, 80, 4096),
                (6844, 1, 'Ss', 1, 14464, 3, 'cache-warmer', 4, 2, 80, 4096),
                (6848, 1, 'Ss', 1, 14312, 3, 'event-relay', 4, 2, 79, 4096),
                (6852, 1, 'Ss', 1, 16496, 3, 'job-runner', 5, 4, 17825820, 17833984),
                (6856, 1, 'Ss', 1, 14216, 3, 'log-shipper', 4, 2, 79, 4096),
                (6860, 1, 'Ss', 1, 14376, 3, 'metrics-agent', 4, 2, 79, 4096),
                (6864, 1, 'Ss', 1, 14228, 3, 'report-indexer', 4, 1, 79, 4096),
            ]),
            (61667.26, {}, [
                (1, 0, 'Ss', 1, 684, 989, 'podman-init', 4, 3, 580972711, 121430016),
                (6, 1, 'S', 1, 1652, 989, 'sleep', 3, 0, 0, 0),
                (6840, 1, 'Ss', 1, 14232, 7, 'backup-sync', 4, 2, 119, 4096),
                (6844, 1, 'Ss', 1, 14472, 7, 'cache-warmer', 4, 2, 119, 4096),
                (6848, 1, 'Ss', 1, 14324, 7, 'event-relay', 4, 2, 118, 4096),
                (6852, 1, 'Ss', 1, 16496, 7, 'job-runner', 5, 5, 46137372, 46145536),
                (6856, 1, 'Ss', 1, 14228, 7, 'log-shipper', 4, 2, 118, 4096),
                (6860, 1, 'Ss', 1, 14384, 7, 'metrics-agent', 4, 2, 118, 4096),
                (6864, 1, 'Ss', 1, 14236, 7, 'report-indexer', 4, 1, 118, 4096),
            ]),
        ],
        "files": [
            (6840, 119, '/home/dev/.local/share/services/var/backup-sync/backup-sync.log'),
            (6844, 119, '/home/dev/.local/share/services/var/cache-warmer/cache-warmer.log'),
            (6848, 118, '/home/dev/.local/share/services/var/event-relay/event-relay.log'),
            (6852, 28, '/home/dev/.local/share/services/var/job-runner/job-runner.log'),
            (6852, 33554432, '/home/dev/.local/share/services/var/job-runner/journal.bin'),
            (6856, 118, '/home/dev/.local/share/services/var/log-shipper/log-shipper.log'),
            (6860, 118, '/home/dev/.local/share/services/var/metrics-agent/metrics-agent.log'),
            (6864, 118, '/home/dev/.local/share/services/var/report-indexer/report-indexer.log'),
        ],
    },
    'thread_explosion': {
        "samples": [
            (61676.74, {}, [
                (1, 0, 'Ss', 1, 684, 999, 'podman-init', 4, 3, 638645180, 179134464),
                (6, 1, 'S', 1, 1652, 999, 'sleep', 3, 0, 0, 0),
                (7028, 1, 'Ssl', 201, 17752, 4, 'backup-sync', 4, 8, 60, 4096),
                (7032, 1, 'Ss', 1, 14180, 4, 'cache-warmer', 4, 1, 79, 4096),
                (7036, 1, 'Ss', 1, 14068, 4, 'event-relay', 4, 1, 79, 4096),
                (7040, 1, 'Ss', 1, 14312, 4, 'job-runner', 4, 1, 79, 4096),
                (7044, 1, 'Ss', 1, 14456, 4, 'log-shipper', 4, 2, 79, 8192),
                (7048, 1, 'Ss', 1, 14224, 4, 'metrics-agent', 4, 1, 79, 4096),
                (7053, 1, 'Ss', 1, 14376, 4, 'report-indexer', 4, 2, 79, 4096),
            ]),
            (61681.2, {}, [
                (1, 0, 'Ss', 1, 684, 1003, 'podman-init', 4, 3, 638645180, 179134464),
                (6, 1, 'S', 1, 1652, 1003, 'sleep', 3, 0, 0, 0),
                (7028, 1, 'Ssl', 201, 17752, 8, 'backup-sync', 4, 8, 60, 4096),
                (7032, 1, 'Ss', 1, 14188, 8, 'cache-warmer', 4, 1, 118, 4096),
                (7036, 1, 'Ss', 1, 14080, 8, 'event-relay', 4, 1, 118, 4096),
                (7040, 1, 'Ss', 1, 14324, 8, 'job-runner', 4, 1, 118, 4096),
                (7044, 1, 'Ss', 1, 14468, 8, 'log-shipper', 4, 2, 118, 8192),
                (7048, 1, 'Ss', 1, 14232, 8, 'metrics-agent', 4, 1, 118, 4096),
                (7053, 1, 'Ss', 1, 14384, 8, 'report-indexer', 4, 2, 118, 4096),
            ]),
        ],
        "files": [
            (7028, 60, '/home/dev/.local/share/services/var/backup-sync/backup-sync.log'),
            (7032, 118, '/home/dev/.local/share/services/var/cache-warmer/cache-warmer.log'),
            (7036, 118, '/home/dev/.local/share/services/var/event-relay/event-relay.log'),
            (7040, 169, '/home/dev/.local/share/services/var/job-runner/job-runner.log'),
            (7044, 118, '/home/dev/.local/share/services/var/log-shipper/log-shipper.log'),
            (7048, 118, '/home/dev/.local/share/services/var/metrics-agent/metrics-agent.log'),
            (7053, 170, '/home/dev/.local/share/services/var/report-indexer/report-indexer.log'),
        ],
    },
}


# Raw lines as the sampler printed them (cpu_spin, first sample; a zombie of zombie_storm), for the parser itself.
RAW = """@time 61602.46
@ps       1       0 Ss      1   684     925 podman-init     /run/podman-init -- sleep infinity
@ps    5854       1 Rs      1 14320       2 event-relay     /usr/bin/python3 /home/dev/.local/share/\
services/bin/event-relay
@ps    6546    5854 Z       1     0       5 log-shipper     [log-shipper] <defunct>
@proc 1 fds=4 rchar=68340627 wchar=350282041 syscr=7754 syscw=1443 read_bytes=2433024 write_bytes=121196544 \
cancelled_write_bytes=0 stat=1 (podman-init) S 0 1 1 0 -1 4194560 1161 451444 1 13 1 1 1427 154 20 0 1 0 6067732
@proc 5854 fds=4 rchar=598036 wchar=28 syscr=92 syscw=1 read_bytes=0 write_bytes=8192 cancelled_write_bytes=0 \
stat=5854 (event-relay) R 1 5854 5854 0 -1 4194560 1588 0 0 0 167 1 0 0 20 0 1 0 6159971 21094400 3542
@proc 77 fds=2 stat=77 (odd) name) S 1 77 77 0 -1 4194560 1 0 0 0 5 6 0 0
garbage line
@ps not numbers at all x y
"""


def as_text(t: float, zombies: dict[int, int], rows: list[Row]) -> str:
    """One sample in the sampler's output format (SAMPLE_COMMAND)."""
    lines = [f"@time {t}"]
    for pid, ppid, stat, nlwp, rss, etimes, comm, fds, ticks, wchar, wbytes in rows:
        args = {"podman-init": "/run/podman-init -- sleep infinity", "sleep": "sleep infinity"}.get(
            comm, f"/usr/bin/python3 /home/dev/.local/share/services/bin/{comm}")
        lines.append(f"@ps {pid:7d} {ppid:7d} {stat:4s} {nlwp:4d} {rss:6d} {etimes:7d} {comm:15s} {args}")
        lines.append(f"@proc {pid} fds={fds} rchar=1000 wchar={wchar} read_bytes=0 write_bytes={wbytes} "
                     f"cancelled_write_bytes=0 stat={pid} ({comm}) {stat[0]} {ppid} {pid} {pid} 0 -1 4194560 "
                     f"1588 0 0 0 {ticks} 0 0 0 20 0 {nlwp} 0 6159971")
    n = 100000
    for parent, count in zombies.items():
        comm = next(r[6] for r in rows if r[0] == parent)
        for _ in range(count):
            n += 1
            lines.append(f"@ps {n:7d} {parent:7d} Z       1     0       5 {comm:15s} [{comm}] <defunct>")
    return "\n".join(lines) + "\n"


def files_text(files: list[tuple[int, int, str]]) -> str:
    opened = "".join(f"@open {pid} {size} {path}\n" for pid, size, path in files)
    return opened + "@df tmpfs 524288 225280 299008 43% /tmp\n"


def recorded(anomaly: str, without: str | None = None) -> tuple[list[dm.Sample], list[dm.OpenFile]]:
    """The recording parsed as the agent parses it; `without` drops that program and its zombies."""
    rec: dict[str, Any] = RECORDED[anomaly]
    samples = []
    for t, zombies, rows in rec["samples"]:
        gone = {r[0] for r in rows if r[6] == without}
        samples.append(dm.parse_sample(as_text(t, {p: c for p, c in zombies.items() if p not in gone},
                                               [r for r in rows if r[0] not in gone])))
    pids = {p for s in samples for p in s.procs}
    return samples, dm.parse_files(files_text([f for f in rec["files"] if f[0] in pids]))


class Replay:
    """A gateway whose `exec` answers the recorded outputs in order: the samples, then the files."""

    def __init__(self, anomaly: str) -> None:
        rec: dict[str, Any] = RECORDED[anomaly]
        texts = [as_text(*s) for s in rec["samples"]]
        self.answers = [texts[0], texts[0], texts[1], files_text(rec["files"]) + "@clk 100\n"]
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, tool: str, **args: Any) -> Any:
        self.calls.append((tool, args))
        return {"exit_code": 0, "stdout": self.answers[len(self.calls) - 1], "stderr": ""}


def test_the_parser_reads_ps_and_proc_lines_and_skips_what_it_does_not_know() -> None:
    s = dm.parse_sample(RAW)
    assert s.time == 61602.46
    assert sorted(s.procs) == [1, 5854, 6546]
    relay = s.procs[5854]
    assert (relay.ppid, relay.stat, relay.nlwp, relay.rss_kb, relay.etimes, relay.comm) == (1, "Rs", 1, 14320, 2,
                                                                                            "event-relay")
    assert relay.args == "/usr/bin/python3 /home/dev/.local/share/services/bin/event-relay"
    assert (relay.fds, relay.cpu_ticks) == (4, 168)  # utime 167 + stime 1
    assert relay.io["wchar"] == 28 and relay.io["write_bytes"] == 8192
    assert s.procs[1].cpu_ticks == 2  # utime 1 + stime 1; its reaped children's (cutime, cstime) do not count
    zombie = s.procs[6546]
    assert zombie.stat == "Z" and zombie.fds is None and zombie.args == "[log-shipper] <defunct>"


def test_the_files_parser_keeps_paths_with_spaces() -> None:
    files = dm.parse_files("@open 7 1048576 /tmp/a b/c.dat\n@open x 1 /y\n@df tmpfs 1 2 3 4% /tmp\n")
    assert files == [dm.OpenFile(7, 1048576, "/tmp/a b/c.dat")]


@pytest.mark.parametrize("anomaly", sorted(BAD))
def test_each_recorded_anomaly_is_found_in_its_process(anomaly: str) -> None:
    samples, files = recorded(anomaly)
    verdict = dm.decide(samples, files)
    assert verdict is not None
    assert (verdict.name, verdict.anomaly) == (BAD[anomaly], anomaly)
    assert verdict.strength >= 1.5, f"{verdict.describe()}: too close to its threshold"


@pytest.mark.parametrize("anomaly", sorted(BAD))
def test_the_healthy_services_alone_raise_nothing(anomaly: str) -> None:
    samples, files = recorded(anomaly, without=BAD[anomaly])
    assert len(dm.services(samples[-1])) == 6
    assert dm.findings(samples, files) == []
    out = dm.diagnosis(None, [])
    assert out["incident"] is False and out["entities"] == []


@pytest.mark.parametrize("anomaly", sorted(BAD))
def test_a_replayed_run_writes_a_diagnosis_that_passes_the_scenario(anomaly: str, tmp_path: Path) -> None:
    """The agent end to end on the recording: exec only, three samples, then the files; its output is valid and
    scores fl_pass 1 against the scenario's ground truth (the reference answer too)."""
    gateway = Replay(anomaly)
    slept: list[float] = []
    out = dm.run(gateway, sleep=slept.append)
    assert [tool for tool, _ in gateway.calls] == ["exec"] * 4
    assert slept == [dm.INTERVAL_S] * (dm.SAMPLES - 1)
    spec_dir = SPECS / f"devops-monitor-{anomaly.replace('_', '-')}"
    spec = yaml.safe_load((spec_dir / "scenario.yaml").read_text())
    truth = yaml.safe_load((spec_dir / "ground_truth.yaml").read_text())
    topology = load_topology("workspace")
    assert spec["faults"][0]["args"] == {"name": BAD[anomaly], "anomaly": anomaly}
    assert out["entities"] == [{"id": BAD[anomaly], "root_cause": True, "layer": "process", "fault_type": anomaly}]
    for i, output in enumerate((out, spec["reference"][0]["args"]["output"])):
        path = tmp_path / f"output-{i}.json"
        path.write_text(json.dumps(output))
        assert load_output(path, "diagnose").status == "scored"
        scores = score_diagnosis(path, truth, topology)
        assert scores["fl_pass"] == 1.0, scores
        assert (scores["type_match"], scores["layer_match"], scores["ntam_fl"]) == (1.0, 1.0, 1.0), scores


def test_the_samplers_own_commands_and_the_containers_own_processes_are_not_judged() -> None:
    rows: list[Row] = [
        (1, 0, "Ss", 1, 684, 900, "podman-init", 4, 2, 10**9, 10**9),  # the init: huge counters of reaped children
        (6, 1, "S", 1, 1652, 900, "sleep", 3, 0, 0, 0),
        (700, 0, "Ss", 1, 3000, 0, "bash", 4, 90, 10**8, 0),  # the sampler itself: young, busy
        (701, 700, "R", 1, 4000, 0, "ps", 900, 0, 0, 0),
    ]
    later: list[Row] = [(p, pp, st, n, r, e + 2, c, f, t * 10, w * 10, b * 10) for p, pp, st, n, r, e, c, f, t, w, b
                        in rows]
    samples = [dm.parse_sample(as_text(100.0, {}, rows)), dm.parse_sample(as_text(102.0, {}, later))]
    assert dm.services(samples[-1]) == []
    assert dm.decide(samples, []) is None


def test_a_big_file_written_fast_is_disk_fill_not_io_hog() -> None:
    """While the spool still grows, its writer is over both thresholds: the open file decides."""
    samples, files = recorded("disk_fill")
    bad = next(p for p in samples[-1].procs.values() if p.comm == "metrics-agent")
    samples[-1].procs[bad.pid].io["wchar"] = samples[0].procs[bad.pid].io["wchar"] + 40 * dm.MIB
    found = dm.findings(samples, files)
    assert [f.anomaly for f in found] == ["disk_fill", "io_hog"]
    assert dm.decide(samples, files) == found[0]
    out = dm.diagnosis(found[0], found)
    assert "io_hog" in out["explanation"] and out["entities"][0]["fault_type"] == "disk_fill"
    assert "220 MiB in /tmp/services/metrics-agent/spool/batch-0001.dat" in out["explanation"]


def test_memory_still_growing_counts_before_it_is_large() -> None:
    samples, files = recorded("memory_leak", without="report-indexer")
    pid = next(p.pid for p in samples[-1].procs.values() if p.comm == "cache-warmer")
    samples[0].procs[pid].rss_kb = 20 * 1024
    samples[-1].procs[pid].rss_kb = 100 * 1024  # +80 MiB in the samples, under 150 MiB
    verdict = dm.decide(samples, files)
    assert verdict is not None and (verdict.name, verdict.anomaly) == ("cache-warmer", "memory_leak")


def test_a_reused_pid_gives_no_deltas() -> None:
    samples, files = recorded("cpu_spin")
    pid = next(p.pid for p in samples[-1].procs.values() if p.comm == "event-relay")
    samples[0].procs[pid].comm = "something-else"
    assert dm.decide(samples, files) is None


def test_the_strongest_process_wins_within_one_anomaly() -> None:
    samples, files = recorded("thread_explosion")
    pid = next(p.pid for p in samples[-1].procs.values() if p.comm == "job-runner")
    samples[-1].procs[pid].nlwp = 60
    found = dm.findings(samples, files)
    assert [(f.name, f.anomaly) for f in found] == [("backup-sync", "thread_explosion"), ("job-runner",
                                                                                         "thread_explosion")]


def test_main_writes_the_output_the_manifest_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = Replay("fd_leak")
    monkeypatch.setattr(dm, "GatewayClient", lambda url, token: gateway)
    monkeypatch.setattr("time.sleep", lambda s: None)
    (tmp_path / "token").write_text("t0k3n\n")
    manifest = {"tools": {"url": "http://127.0.0.1:1"}, "token_file": str(tmp_path / "token"),
                "output": {"path": str(tmp_path / "out.json")}, "tasks": [{"id": "diagnose", "kind": "diagnose"}]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("OPSBENCH_MANIFEST", str(tmp_path / "manifest.json"))
    assert dm.main() == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["entities"][0]["id"] == "cache-warmer" and out["entities"][0]["fault_type"] == "fd_leak"
    monkeypatch.setenv("OPSBENCH_MANIFEST", str(tmp_path / "none.json"))
    (tmp_path / "none.json").write_text(json.dumps({**manifest, "tools": {}}))
    with pytest.raises(SystemExit) as stopped:
        dm.main()
    assert stopped.value.code == 2
