# Runs on a node as its own user unit beside the unit it guards, the worker or llama-server
# (native/unit/start.sh writes this file and starts it): samples the guarded unit's RSS and the
# node's MemAvailable, and at the threshold stops that unit and says why, on stdout (the
# journal) and in its log file. On this unified-memory part an OOM takes out unrelated services
# (the runbook: it killed avahi-daemon, and the box vanished from mDNS); the worker also retains
# ~245 MiB per model share and never returns it, and the client node holds most of a split model.
# The threshold is on the node's used memory, MemTotal - MemAvailable, as a percentage of
# MemTotal: what an OOM is about. It keeps running after a stop, so a restarted unit is
# guarded again. Arguments: --unit U --percent P --interval S --log FILE.
import argparse
import subprocess
import sys
import time


def meminfo():
    vals = {}
    for line in open("/proc/meminfo"):
        k, v = line.split(":", 1)
        vals[k] = int(v.split()[0]) * 1024
    return vals["MemTotal"], vals["MemAvailable"]


def main_pid(unit):
    r = subprocess.run(["systemctl", "--user", "show", unit, "-p", "MainPID", "--value"],
                       capture_output=True, text=True, timeout=30)
    try:
        return int(r.stdout.strip() or 0)
    except ValueError:
        return 0


def rss(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def say(log, msg):
    line = time.strftime("%Y-%m-%dT%H:%M:%S") + " rss-guard: " + msg
    print(line, flush=True)
    with open(log, "a") as f:
        f.write(line + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--unit", required=True)
    p.add_argument("--percent", type=float, required=True)
    p.add_argument("--interval", type=float, default=2.0)
    p.add_argument("--log", required=True)
    a = p.parse_args()
    total, _ = meminfo()
    say(a.log, f"guarding {a.unit}: stop at {a.percent:g}% of {total / 2**30:.1f} GiB used, every {a.interval:g} s")
    peak = 0
    while True:
        pid = main_pid(a.unit)
        if pid > 0:
            total, avail = meminfo()
            used = total - avail
            r = rss(pid)
            peak = max(peak, r)
            pct = 100.0 * used / total
            if pct >= a.percent:
                say(a.log, f"node memory {pct:.1f}% used ({used / 2**20:.0f} of {total / 2**20:.0f} MiB, "
                    f"MemAvailable {avail / 2**20:.0f} MiB) >= {a.percent:g}%; worker RSS "
                    f"{r / 2**20:.0f} MiB (peak {peak / 2**20:.0f} MiB): stopping {a.unit}")
                subprocess.run(["systemctl", "--user", "stop", a.unit], timeout=60)
                say(a.log, f"stopped {a.unit}")
        time.sleep(a.interval)


if __name__ == "__main__":
    sys.exit(main())
