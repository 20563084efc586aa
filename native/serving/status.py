# Runs on the client node: the server's unit and its RSS guard's as systemd sees them, the
# running binary's digest, who listens on the port (the kernel's socket table), GET /health,
# and the log lines that say where the model landed (every load_tensors line) plus the tail.
# One JSON object on stdout. Arguments: PORT BIN BIND
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import urllib.error
import urllib.request

PROPS = ["ActiveState", "SubState", "Result", "NRestarts", "InvocationID", "MainPID"]


def unit(name):
    r = subprocess.run(
        ["systemctl", "--user", "show", name, "-p", ",".join(PROPS)],
        capture_output=True, text=True, timeout=30,
    )
    props = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    return {k: props.get(k, "") for k in PROPS}


def sha256(path):
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return ""


def listeners(port):
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            ip, p = f[1].split(":")
            if int(p, 16) != port or f[3] != "0A":
                continue
            if len(ip) == 8:
                out.append(socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(ip, 16))))
            else:
                raw = b"".join(struct.pack("<I", int(ip[i:i + 8], 16)) for i in range(0, 32, 8))
                out.append(socket.inet_ntop(socket.AF_INET6, raw))
    return sorted(set(out))


def health(bind, port):
    host = f"[{bind}]" if ":" in bind else bind
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=5) as r:
            return {"status": r.status, "body": r.read(2000).decode("utf-8", "replace")}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read(2000).decode("utf-8", "replace")}
    except Exception as e:  # refused, timed out: not serving
        return {"status": 0, "body": str(e)}


# The server's log grows with every request (gigabytes on a long-running server): read at most
# its first HEAD bytes, where the model's load lines are, and enough of its end for the tail.
HEAD = 1 << 20
TAIL = 1 << 20


def decoded(b):
    return b.decode("utf-8", "replace").splitlines()


def last_lines(f, size, n, cap):
    """The last n lines of the file's last `cap` bytes, read in growing windows from the end."""
    window = 1 << 16
    while True:
        window = min(window, size, cap)
        f.seek(size - window)
        b = f.read(window)
        if window < size and b"\n" in b:
            b = b[b.index(b"\n") + 1:]  # a partial first line is not a line of the log
        lines = decoded(b)
        if len(lines) >= n or window >= min(size, cap):
            return lines[-n:]
        window *= 4


# The lines that say where the model landed (model buffers, KV cache shares), kept from the head.
MARKS = ("load_tensors:", "llama_kv_cache:", "llama_model_load", "error", "failed", "rpc", "RPC")
# The log stays on the node, bounded: past CAP bytes it is cut to its marked head lines and its
# last KEEP bytes, in place (the server appends: O_APPEND writes land at the new end).
CAP = 64 << 20
KEEP = 16 << 20


def bound(path):
    try:
        with open(path, "r+b") as f:
            size = f.seek(0, 2)
            if size <= CAP:
                return
            f.seek(0)
            head = f.read(HEAD)
            head = head[: head.rindex(b"\n") + 1] if b"\n" in head else b""
            kept = b"".join(l + b"\n" for l in head.splitlines() if any(m.encode() in l for m in MARKS))
            f.seek(size - KEEP)
            tail = f.read(KEEP)
            tail = tail[tail.index(b"\n") + 1:] if b"\n" in tail else b""
            note = b"--- sparkform: the log was cut to its load lines and its last %d MiB ---\n" % (KEEP >> 20)
            f.seek(0)
            f.truncate(0)
            f.write(kept + note + tail)
    except OSError:
        pass


def log_lines(path, keep=200):
    marks = MARKS
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(0)
            if size <= HEAD + TAIL:
                lines = decoded(f.read())
                return [l for l in lines[:-keep] if any(m in l for m in marks)] + lines[-keep:]
            head = f.read(HEAD)
            head = decoded(head[: head.rindex(b"\n") + 1] if b"\n" in head else b"")
            return [l for l in head if any(m in l for m in marks)] + last_lines(f, size, keep, TAIL)
    except OSError:
        return []


def main(argv):
    port, binary, bind = int(argv[0]), argv[1], argv[2]
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    u = unit(f"sparkform-llama-server-{port}.service")
    pid = int(u.get("MainPID") or 0)
    state = os.path.expanduser("~/.cache/sparkform/serving")
    bound(f"{state}/server-{port}.log")
    return {
        "unit": u,
        "guard": unit(f"sparkform-llama-guard-{port}.service"),
        "runningDigest": sha256(f"/proc/{pid}/exe") if pid > 0 else "",
        "binaryDigest": sha256(os.path.expanduser(binary)),
        "listening": listeners(port),
        "health": health(bind, port),
        "log": log_lines(f"{state}/server-{port}.log"),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
