# sparkform doctor's probe, sent to a node like every node program (components/native-script.ts).
# Read-only: it reads /proc and stat()s paths; it writes nothing. Prints one JSON object:
#   now        the node's clock (seconds since the epoch)
#   user, linger  the login user and whether systemd lingers for it
#   ports      per asked port: the listening addresses and, for processes this user can see,
#              the pid, command and systemd unit (from /proc/<pid>/cgroup)
#   files      per asked path (~ = $HOME): whether it exists and its size
# argv: --port P ... --file PATH ...
import json, os, pwd, sys, time

now = time.time()
ports, files, mode = [], [], None
for a in sys.argv[1:]:
    if a in ("--port", "--file"):
        mode = a
    elif mode == "--port":
        ports.append(int(a))
    elif mode == "--file":
        files.append(a)

user = pwd.getpwuid(os.getuid()).pw_name
linger = os.path.exists("/var/lib/systemd/linger/" + user)


def hex_addr(h, v6):
    if not v6:
        b = bytes.fromhex(h)[::-1]
        return ".".join(str(x) for x in b)
    raw = bytes.fromhex(h)
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
    full = b"".join(words).hex()
    return ":".join(full[i : i + 4] for i in range(0, 32, 4))


listening = {}  # inode -> (addr, port)
for name, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
    try:
        with open(name) as f:
            next(f)
            for line in f:
                p = line.split()
                if p[3] != "0A":  # TCP_LISTEN
                    continue
                addr, port = p[1].split(":")
                listening[p[9]] = (hex_addr(addr, v6), int(port, 16))
    except OSError:
        pass

owners = {}  # inode -> (pid, comm, unit)
wanted = {i for i, (_, port) in listening.items() if port in ports}
if wanted:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                t = os.readlink("/proc/%s/fd/%s" % (pid, fd))
            except OSError:
                continue
            if t.startswith("socket:[") and t[8:-1] in wanted:
                unit = None
                try:
                    with open("/proc/%s/cgroup" % pid) as f:
                        for part in f.read().strip().split("/"):
                            if part.endswith(".service") or part.endswith(".scope"):
                                unit = part
                    with open("/proc/%s/comm" % pid) as f:
                        comm = f.read().strip()
                except OSError:
                    comm = None
                owners[t[8:-1]] = {"pid": int(pid), "command": comm, "unit": unit}

out_ports = []
for port in ports:
    held = [
        dict({"address": a}, **(owners.get(i) or {"pid": None, "command": None, "unit": None}))
        for i, (a, pt) in listening.items()
        if pt == port
    ]
    out_ports.append({"port": port, "listeners": held})

home = os.path.expanduser("~")
out_files = []
for p in files:
    full = os.path.join(home, p[2:]) if p.startswith("~/") else p
    try:
        st = os.stat(full)
        out_files.append({"path": p, "exists": True, "size": st.st_size})
    except OSError:
        out_files.append({"path": p, "exists": False, "size": None})

print(json.dumps({"now": now, "user": user, "linger": linger, "ports": out_ports, "files": out_files}))
