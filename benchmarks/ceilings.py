"""The machine's own ceilings, for context next to the broker figures.

Loopback TCP throughput (one sender, one receiver, 1 MiB writes) bounds what any
broker can move through 127.0.0.1; the data disk's fsync rate (4 KiB appends,
each fsynced, in the directory where the brokers' fresh data dirs are made)
bounds how many group commits per second a durable broker can make.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time

CHUNK = b"x" * (1 << 20)


def loopback_tcp_bytes_per_second(seconds: float = 2.0) -> float:
    """Bytes/s from one socket to another over 127.0.0.1 (the receiver in a thread;
    socket calls release the GIL, so the two sides run on both cores)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        received = [0]

        def receive() -> None:
            connection, _ = server.accept()
            with connection:
                while data := connection.recv(1 << 20):
                    received[0] += len(data)

        receiver = threading.Thread(target=receive)
        receiver.start()
        with socket.create_connection(server.getsockname()) as sender:
            started = time.perf_counter()
            while time.perf_counter() - started < seconds:
                sender.sendall(CHUNK)
        receiver.join(30)
        return received[0] / (time.perf_counter() - started)


def fsync_rate(seconds: float = 2.0, directory: str | None = None) -> float:
    """fsyncs/s of 4 KiB appends in ``directory`` (default: where temp data dirs go)."""
    with tempfile.NamedTemporaryFile(dir=directory or tempfile.gettempdir()) as handle:
        count = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            handle.write(b"x" * 4096)
            handle.flush()
            os.fsync(handle.fileno())
            count += 1
        return count / (time.perf_counter() - started)


def measure(seconds: float = 2.0) -> dict[str, float]:
    return {
        "loopback_tcp_mb_per_s": loopback_tcp_bytes_per_second(seconds) / 1e6,
        "data_disk_fsyncs_per_s": fsync_rate(seconds),
    }


if __name__ == "__main__":
    print(measure())
