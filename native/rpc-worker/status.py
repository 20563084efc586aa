# Runs on a worker node: the worker's and guard's units as systemd sees them, the running
# binary's digest, who listens on and who is connected to the port (the kernel's socket
# table), the log lines that tell the transport, the worker's RSS beside the node's memory, and
# sparkform workers on other ports (`sparkform worker start --port`). One JSON object on stdout.
# Arguments: PORT BIN [TAIL] (BIN: the binary the unit was started with; TAIL: also the log's
# last TAIL lines, exactly, as "tail": `sparkform worker logs`; from at most its last 16 MiB).
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys

PROPS = ["ActiveState", "SubState", "Result", "NRestarts", "InvocationID", "MainPID", "ExecMainStatus",
         "ExecStart", "Environment"]


def unit(name):
    r = subprocess.run(
        ["systemctl", "--user", "show", name, "-p", ",".join(PROPS)],
        capture_output=True, text=True, timeout=30,
    )
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip()}
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


def addr(hexaddr):
    ip, port = hexaddr.split(":")
    if len(ip) == 8:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(ip, 16))), int(port, 16)
    raw = b"".join(struct.pack("<I", int(ip[i:i + 8], 16)) for i in range(0, 32, 8))
    return socket.inet_ntop(socket.AF_INET6, raw), int(port, 16)


def sockets(port):
    listening, established = [], []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            (lip, lport), (rip, rport) = addr(f[1]), addr(f[2])
            if lport != port:
                continue
            if f[3] == "0A":
                listening.append(lip)
            elif f[3] == "01":
                established.append(f"{rip}:{rport}")
    return sorted(set(listening)), sorted(set(established))


# The debug log grows with every RPC command (gigabytes on a long-running worker): read at most
# its first HEAD bytes, where the banner is, and enough of its end for the last lines.
HEAD = 1 << 20
TAIL = 1 << 20
TAIL_ASKED = 16 << 20  # `sparkform worker logs N`: at most this much of the end


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


def log_lines(path, keep=400):
    # The banner and transport lines wherever they are in the first HEAD bytes, plus the tail.
    marks = ("Starting RPC server", "endpoint", "local cache", "transport", "RDMA", "Devices", "MiB")
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


def tail(path, n):
    if n <= 0:
        return []
    try:
        with open(path, "rb") as f:
            return last_lines(f, f.seek(0, 2), n, TAIL_ASKED)
    except OSError:
        return []


def memory(pid):
    """The worker's VmRSS/VmHWM and the node's MemTotal/MemAvailable, in bytes (the guard's terms)."""
    def kb(path, keys):
        vals = {}
        try:
            for line in open(path):
                k, _, v = line.partition(":")
                if k in keys:
                    vals[k] = int(v.split()[0]) * 1024
        except OSError:
            pass
        return vals
    proc = kb(f"/proc/{pid}/status", ("VmRSS", "VmHWM")) if pid > 0 else {}
    node = kb("/proc/meminfo", ("MemTotal", "MemAvailable"))
    return {"rss": proc.get("VmRSS", 0), "peakRss": proc.get("VmHWM", 0),
            "memTotal": node.get("MemTotal", 0), "memAvailable": node.get("MemAvailable", 0)}


def others(port):
    r = subprocess.run(
        ["systemctl", "--user", "list-units", "--plain", "--no-legend", "--state=active", "sparkform-rpc-worker-*"],
        capture_output=True, text=True, timeout=30,
    )
    names = [l.split()[0] for l in r.stdout.splitlines() if l.strip()]
    return sorted(n for n in names if n != f"sparkform-rpc-worker-{port}.service")


def main(argv):
    port, binary = int(argv[0]), argv[1]
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    w = unit(f"sparkform-rpc-worker-{port}.service")
    g = unit(f"sparkform-rpc-guard-{port}.service")
    pid = int(w.get("MainPID") or 0)
    running = sha256(f"/proc/{pid}/exe") if pid > 0 else ""
    listening, established = sockets(port)
    state = os.path.expanduser("~/.cache/sparkform/rpc-worker")
    out = {
        "worker": w,
        "guard": g,
        "runningDigest": running,
        "binaryDigest": sha256(binary),
        "listening": listening,
        "established": established,
        "log": log_lines(f"{state}/worker-{port}.log"),
        "guardLog": log_lines(f"{state}/guard-{port}.log", 20),
        "memory": memory(pid),
        "others": others(port),
    }
    if len(argv) > 2:
        out["tail"] = tail(f"{state}/worker-{port}.log", int(argv[2]))
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
