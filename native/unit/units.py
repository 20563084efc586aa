# Runs on a node: the state of the sparkform user units named on the command line, as systemd
# sees them, for `sparkform drift --metrics-dir` (node_exporter cannot see user units). Read-only:
# one `systemctl --user show` per unit; it starts, stops and writes nothing. Prints one JSON
# object: {"units": [{"unit", "activeState", "subState", "restarts", "lastStart", "error"}]}
# where lastStart is the unit's last start in seconds since the epoch (0 never), taken from the
# monotonic stamp (ExecMainStartTimestampMonotonic) and this node's clocks, so it reads the same
# on every systemd version. A unit systemd does not know is "inactive" with restarts 0.
# argv: UNIT ...
import json, subprocess, sys, time

PROPS = ["ActiveState", "SubState", "NRestarts", "ExecMainStartTimestampMonotonic"]


def number(text):
    try:
        return int(text)
    except ValueError:
        return 0


def show(name):
    r = subprocess.run(
        ["systemctl", "--user", "show", name, "-p", ",".join(PROPS)],
        capture_output=True, text=True, timeout=30,
    )
    if r.returncode != 0:
        return {"unit": name, "activeState": "", "subState": "", "restarts": 0, "lastStart": 0,
                "error": (r.stderr or r.stdout).strip()[:2000]}
    props = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    mono = number(props.get("ExecMainStartTimestampMonotonic", "0"))
    last = round(time.time() - (time.monotonic() - mono / 1e6)) if mono > 0 else 0
    return {"unit": name, "activeState": props.get("ActiveState", ""),
            "subState": props.get("SubState", ""),
            "restarts": number(props.get("NRestarts", "0")), "lastStart": last, "error": ""}


print(json.dumps({"units": [show(u) for u in sys.argv[1:]]}))
