# Runs on the router's node: takes one llama-server out of the router's rotation before `up`
# restarts it, and puts it back after (components/serving/roll.ts). The router's own selection
# policy (setup/router/main.go, sparkform_drain) reads the drain file on every request: a dial it
# names gets no new request while another upstream is available. Nothing in flight is touched:
# no config is reloaded, so the streams a replica is still sending end as they would.
# Arguments:
#   out CONFIG DRAIN DIAL TIMEOUT   DIAL into DRAIN (temp name, then rename), when the router's
#                                   config (CONFIG) has it and another upstream answers /health;
#                                   then wait, TIMEOUT seconds at most, until GET http://DIAL/slots
#                                   shows no slot processing (twice, half a second apart)
#   in DRAIN DIAL SETTLE            DIAL out of DRAIN (the file removed when it names no other),
#                                   then SETTLE seconds for the router's health checks to pass it
# CONFIG and DRAIN may start with "~/". The API key for /slots, when the servers have one,
# arrives as SPARKFORM_API_KEY (the secret preamble). One JSON object on stdout
# (roll.schema.json); never a request's text, only counts.
import json
import os
import sys
import time
import urllib.error
import urllib.request

HEALTH_TIMEOUT = 3
POLL = 0.5


def path_of(p):
    return os.path.expanduser(p)


def read_drain(path):
    try:
        with open(path) as f:
            return [line.strip() for line in f if line.strip()]
    except FileNotFoundError:
        return []


def write_drain(path, dials):
    if not dials:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(d + "\n" for d in dials))
    os.replace(tmp, path)


def upstreams(config):
    """The dials of the proxy the drain policy picks from (its selection_policy names it)."""
    found = []

    def walk(v):
        if isinstance(v, dict):
            policy = (v.get("load_balancing") or {}).get("selection_policy") or {}
            if v.get("handler") == "reverse_proxy" and policy.get("policy") == "sparkform_drain":
                found.extend(u.get("dial", "") for u in v.get("upstreams", []))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(config)
    return [d for d in dict.fromkeys(found) if d]


def get(url, key, timeout):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read(1 << 20)


def healthy(dial):
    try:
        return get(f"http://{dial}/health", "", HEALTH_TIMEOUT)[0] == 200
    except (OSError, urllib.error.URLError):
        return False


def busy_slots(dial, key):
    """(processing, slots) now; None when the server does not answer (nothing in flight); a
    string when it answers but not with slots (why the wait cannot judge)."""
    try:
        _, body = get(f"http://{dial}/slots", key, 10)
    except urllib.error.HTTPError as e:
        return f"GET /slots answered {e.code}, so whether requests are in flight is not known"
    except (OSError, urllib.error.URLError):
        return None
    try:
        slots = json.loads(body)
        return sum(1 for s in slots if s.get("is_processing")), len(slots)
    except (ValueError, AttributeError, TypeError):
        return "GET /slots did not answer a list of slots"


def roll_out(config_path, drain_path, dial, timeout, key):
    try:
        with open(config_path) as f:
            dials = upstreams(json.load(f))
    except FileNotFoundError:
        return {"out": False, "reason": f"no router config at {config_path} yet"}
    if dial not in dials:
        return {"out": False, "reason": f"{dial} is not one of the router's upstreams ({', '.join(dials)})"}
    drained = read_drain(drain_path)
    others = [d for d in dials if d != dial and d not in drained]
    if not others:
        return {"out": False, "reason": f"{dial} is the router's only upstream in rotation"}
    if not any(healthy(d) for d in others):
        return {
            "out": False,
            "reason": f"no other upstream answers /health ({', '.join(others)}): taking {dial} out would leave the endpoint nothing",
        }
    write_drain(drain_path, drained if dial in drained else drained + [dial])
    start = time.monotonic()

    def waited(idle, reason):
        return {"out": True, "idle": idle, "waitedSeconds": round(time.monotonic() - start, 1), "reason": reason}

    # A request the router chose just before the write may still be on its way.
    time.sleep(1)
    idle_seen = 0
    while True:
        now = busy_slots(dial, key)
        if now is None:
            return waited(True, "the server does not answer: nothing in flight")
        if isinstance(now, str):
            return waited(False, now)
        idle_seen = idle_seen + 1 if now[0] == 0 else 0
        if idle_seen >= 2:
            return waited(True, "")
        if time.monotonic() - start >= timeout:
            return waited(False, f"{now[0]} of {now[1]} slots still processing after {timeout} s")
        time.sleep(POLL)


def roll_in(drain_path, dial, settle):
    left = [d for d in read_drain(drain_path) if d != dial]
    write_drain(drain_path, left)
    time.sleep(settle)
    return {"in": True, "drained": left}


def main(argv):
    key = os.environ.pop("SPARKFORM_API_KEY", "")
    if argv[:1] == ["out"] and len(argv) == 5:
        return roll_out(path_of(argv[1]), path_of(argv[2]), argv[3], float(argv[4]), key)
    if argv[:1] == ["in"] and len(argv) == 4:
        return roll_in(path_of(argv[1]), argv[2], float(argv[3]))
    print("roll.py: it takes out CONFIG DRAIN DIAL TIMEOUT | in DRAIN DIAL SETTLE", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
