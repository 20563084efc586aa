# Runs on a worker node: the decode fast path in the worker's debug log (GGML_RPC_DEBUG=1):
# how many `[graph_compute]` and `[graph_recompute]` lines it has (ggml-rpc.cpp's LOG_DBG
# "[%s] device: …" with __func__), and whether a recompute follows the first compute,
# counted from byte offset FROM on (the log's size before the smoke); and the byte counters of
# the interface that holds the worker's address (the far end of the smoke's fabric proof).
# One JSON object.
# The log is cut in place past 64 MiB by each status read (native/lib/nodefs.py bound): a log
# smaller than FROM was cut (or replaced) since the smoke began, and what it holds now is its
# last 16 MiB, lines from before the smoke among them. Counting them could prove the decode
# path with stale lines, so nothing is counted: {"shrunk": true, ...} with zero counts.
# Arguments: LOG FROM ADDR ("size" instead of FROM: the log's current size and the counters only).
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # native/lib/ (inlined on a node)
from nodenet import dev_bytes, iface_of  # noqa: E402


def counters(addr):
    """The interface holding IPv4 `addr`, and its rx and tx bytes."""
    dev = iface_of(addr)
    if not dev:
        return {"iface": "", "rxBytes": 0, "txBytes": 0}
    rx, tx = dev_bytes(dev)
    return {"iface": dev, "rxBytes": rx, "txBytes": tx}


def graph_counts(path, start):
    """[graph_compute]/[graph_recompute] lines from byte `start` on, and whether a recompute
    follows the first compute. Any recompute after it counts, not only the first recompute: the
    window may open inside another client's decode (a server behind the router serves while the
    smoke runs), whose recomputes come before the smoke's first compute."""
    compute = recompute = 0
    first_compute = last_recompute = -1
    try:
        with open(path, "rb") as f:
            f.seek(start)
            for i, line in enumerate(f):
                if b"[graph_compute]" in line:
                    compute += 1
                    if first_compute < 0:
                        first_compute = i
                elif b"[graph_recompute]" in line:
                    recompute += 1
                    last_recompute = i
    except OSError:
        pass
    return compute, recompute, first_compute >= 0 and last_recompute > first_compute


def main(argv):
    path = os.path.expanduser(argv[0])
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    wire = counters(argv[2])
    if argv[1] == "size":
        return {"size": size, **wire}
    start = int(argv[1])
    shrunk = start > size
    # A shrunk log: nothing is counted.
    compute, recompute, after = (0, 0, False) if shrunk else graph_counts(path, start)
    return {
        "size": size,
        "graphCompute": compute,
        "graphRecompute": recompute,
        "recomputeAfterCompute": after,
        "shrunk": shrunk,
        **wire,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
