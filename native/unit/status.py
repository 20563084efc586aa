# Runs on a node: a supervised unit (native/unit/start.sh's) and its RSS guard as systemd sees
# them, the running binary's digest beside the installed file's, who listens on and who is
# connected to the port (the kernel's socket table), the unit's memory beside the node's, and
# the log lines that matter plus the tail. The worker and the server are both read here
# (components/unit/commands.ts builds the arguments; the stages read the one JSON object it
# prints through components/unit/status.ts). Arguments:
#   --unit NAME --guard-unit NAME --port PORT --bin BIN --state DIR --log NAME
#   [--mark TEXT]... [--keep N] [--tail N] [--others] [--health BIND] [--bound]
# The log is DIR/NAME-PORT.log, the guard's DIR/guard-PORT.log. --mark: a line holding TEXT
# is kept from the log's head (the banner, where the model landed); --keep: how many of its
# last lines (default 200); --tail N: also exactly its last N lines as "tail" (from at most its
# last 16 MiB); --others: the active units of the same name on other ports (one per node);
# --health BIND: GET http://BIND:PORT/health; --bound: cut a log past 64 MiB in place.
# "owner" is the stack the unit records (start.sh's Description "sparkform WHAT of stack
# OWNER"), "" when none: the stages call a unit another stack recorded drift. "boot": this
# boot's id, the boot and invocation of the unit's last recorded start (DIR/UNIT.boot: start.sh's
# own, or the boot's first when the boot started it) and how many stops its worker's loss caused
# since (DIR/UNIT.restarts): the stages tell a unit the boot brought back from a crashed one.
import argparse
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # native/lib/ (inlined on a node)
from nodefs import bound, log_lines, sha256_or_empty, tail  # noqa: E402
from nodenet import established, listening  # noqa: E402

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


def owner(name):
    """The stack UNIT records as its owner (native/unit/start.sh), or ""."""
    r = subprocess.run(
        ["systemctl", "--user", "show", name, "-p", "Description", "--value"],
        capture_output=True, text=True, timeout=30,
    )
    d = r.stdout.strip() if r.returncode == 0 else ""
    if not d.startswith("sparkform ") or " of stack " not in d:
        return ""
    return d.rsplit(" of stack ", 1)[1]


def memory(pid):
    """The unit's VmRSS/VmHWM and the node's MemTotal/MemAvailable, in bytes (the guard's terms)."""
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


def others(prefix, own):
    r = subprocess.run(
        ["systemctl", "--user", "list-units", "--plain", "--no-legend", "--state=active", f"{prefix}-*"],
        capture_output=True, text=True, timeout=30,
    )
    names = [l.split()[0] for l in r.stdout.splitlines() if l.strip()]
    return sorted(n for n in names if n != f"{own}.service")


def health(bind, port):
    host = f"[{bind}]" if ":" in bind else bind
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=5) as r:
            return {"status": r.status, "body": r.read(2000).decode("utf-8", "replace")}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read(2000).decode("utf-8", "replace")}
    except Exception as e:  # refused, timed out: not serving
        return {"status": 0, "body": str(e)}


def first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def boot(state, name):
    """This boot's id, the unit's last recorded start and the stops a lost worker caused."""
    start = (first_line(f"{state}/{name}.boot").split() + ["", ""])[:2]
    try:
        with open(f"{state}/{name}.restarts") as f:
            lost = sum(1 for line in f if line.rstrip().endswith(" peer-lost"))
    except OSError:
        lost = 0
    return {"current": first_line("/proc/sys/kernel/random/boot_id"), "lastStart": start[0],
            "lastStartInvocation": start[1], "peerLost": lost}


def main(argv):
    p = argparse.ArgumentParser(prog="status.py")
    for o in ("--unit", "--guard-unit", "--bin", "--state", "--log"):
        p.add_argument(o, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mark", action="append", default=[])
    p.add_argument("--keep", type=int, default=200)
    p.add_argument("--tail", type=int)
    p.add_argument("--others", action="store_true")
    p.add_argument("--health")
    p.add_argument("--bound", action="store_true")
    a = p.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    state = os.path.expanduser(a.state)
    log = f"{state}/{a.log}-{a.port}.log"
    if a.bound:
        bound(log, a.mark)
    u = unit(f"{a.unit}.service")
    pid = int(u.get("MainPID") or 0)
    out = {
        "unit": u,
        "guard": unit(f"{a.guard_unit}.service"),
        "runningDigest": sha256_or_empty(f"/proc/{pid}/exe") if pid > 0 else "",
        "binaryDigest": sha256_or_empty(os.path.expanduser(a.bin)),
        "listening": listening(a.port),
        "established": established(a.port),
        "log": log_lines(log, a.mark, a.keep),
        "guardLog": log_lines(f"{state}/guard-{a.port}.log", a.mark, 20),
        "memory": memory(pid),
        "owner": owner(f"{a.unit}.service"),
        "boot": boot(state, a.unit),
    }
    if a.others:
        out["others"] = others(a.unit[: -len(f"-{a.port}")], a.unit)
    if a.health is not None:
        out["health"] = health(a.health, a.port)
    if a.tail is not None:
        out["tail"] = tail(log, a.tail)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
