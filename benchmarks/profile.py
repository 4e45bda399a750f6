"""Profiles the kshim broker under one of benchmarks.run's workloads with py-spy.

    python -m benchmarks.profile throughput [--quick] [--native]
    python -m benchmarks.profile venus --quick --gil   # only samples holding the GIL

Attaches ``py-spy record`` (pip install py-spy) to the broker process for the
length of the workload, keeps the raw collapsed stacks in
benchmarks/results/profile-<workload>.txt and prints the functions with the most
samples on CPU, by their own time and including what they call. Idle samples
(the event loop waiting in epoll) are not counted, so the shares are of busy time.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import time
from pathlib import Path

from benchmarks.brokers import running
from benchmarks.run import FULL, QUICK, RESULTS, WORKLOADS

RATE_PER_S = 250


def top_functions(collapsed: str, count: int = 15) -> tuple[list[str], int]:
    """(report lines, total samples) from py-spy's raw format: 'frame;frame;... samples'."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, samples_text = line.rpartition(" ")
        if not stack or not samples_text.isdigit():
            continue
        samples = int(samples_text)
        frames = stack.split(";")[1:]  # the first frame names the thread
        total += samples
        if frames:
            own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    lines = [f"{total} samples on CPU at {RATE_PER_S}/s", "", "own time:"]
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(count)]
    lines += ["", "including callees:"]
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in inclusive.most_common(count)]
    return lines, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--native", action="store_true", help="include C frames (slower)")
    parser.add_argument("--gil", action="store_true", help="only samples holding the GIL")
    arguments = parser.parse_args()
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    output = RESULTS / f"profile-{arguments.workload}{'-gil' if arguments.gil else ''}.txt"
    with running("kshim") as broker:
        command = [py_spy, "record", "--pid", str(broker.pid), "--rate", str(RATE_PER_S),
                   "--format", "raw", "--output", str(output), "--nonblocking"]  # fmt: skip
        command += ["--native"] if arguments.native else []
        command += ["--gil"] if arguments.gil else []
        recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # py-spy attached before the load starts
        started = time.perf_counter()
        metrics = WORKLOADS[arguments.workload](broker, QUICK if arguments.quick else FULL)
        elapsed = time.perf_counter() - started
        recorder.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        _, errors = recorder.communicate(timeout=60)
    if not output.exists():
        raise SystemExit(f"py-spy wrote nothing: {errors.decode(errors='replace')[-500:]}")
    lines, _ = top_functions(Path(output).read_text())
    print(f"{arguments.workload} on kshim, {elapsed:.1f} s: {metrics}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
