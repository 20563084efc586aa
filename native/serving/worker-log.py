# Runs on a worker node: the decode fast path in the worker's debug log (GGML_RPC_DEBUG=1):
# how many `[graph_compute]` and `[graph_recompute]` lines it has (ggml-rpc.cpp's LOG_DBG
# "[%s] device: …" with __func__), and whether the first recompute follows the first compute,
# counted from byte offset FROM on (the log's size before the smoke). One JSON object.
# Arguments: LOG FROM ("size" instead of FROM: print only the log's current size).
import json
import os
import sys


def main(argv):
    path = os.path.expanduser(argv[0])
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    if argv[1] == "size":
        return {"size": size}
    start = int(argv[1]) if int(argv[1]) <= size else 0
    compute = recompute = 0
    first_compute = first_recompute = -1
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
                    if first_recompute < 0:
                        first_recompute = i
    except OSError:
        pass
    return {
        "size": size,
        "graphCompute": compute,
        "graphRecompute": recompute,
        "recomputeAfterCompute": first_compute >= 0 and first_recompute > first_compute,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
