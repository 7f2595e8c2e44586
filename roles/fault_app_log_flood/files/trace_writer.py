"""The mail transport's trace log left on: appends protocol trace lines to PATH at RATE_KB KB/s, forever.

Run inside the service's container by fault_app_log_flood: python3 trace_writer.py PATH RATE_KB PIDFILE
When the disk is full a write fails (ENOSPC); the writer waits a second and tries again, so deleting the log
without stopping the writer lets it fill the disk again. SIGTERM stops it.
"""

import os
import signal
import sys
import time

TICK = 0.1
STATES = ("EHLO", "MAIL FROM", "RCPT TO", "DATA", "QUIT", "STARTTLS", "AUTH PLAIN")


def line(n):
    state = STATES[n % len(STATES)]
    return (f"{time.strftime('%Y-%m-%dT%H:%M:%S')} TRACE smtp.transport session={n:08d} state={state} "
            f"peer=mx{n % 7}.mail.example.net:25 buffer=" + "0123456789abcdef" * 6 + "\n")


def main(argv):
    path, rate_kb, pidfile = argv[0], float(argv[1]), argv[2]
    with open(pidfile, "w") as fh:
        fh.write(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    per_tick = max(1, int(rate_kb * 1024 * TICK))
    n = 0
    while True:
        start = time.monotonic()
        chunk = []
        size = 0
        while size < per_tick:
            text = line(n)
            chunk.append(text)
            size += len(text)
            n += 1
        try:
            with open(path, "a") as fh:
                fh.write("".join(chunk))
        except OSError:
            time.sleep(1.0)  # the disk is full: try again, as a logger does
            continue
        time.sleep(max(0.0, TICK - (time.monotonic() - start)))


if __name__ == "__main__":
    main(sys.argv[1:])
