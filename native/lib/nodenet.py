# nodenet.py — the node's network as its kernel tells it: the TCP socket table of a port, and
# the byte counters of the interface that carries an address (the fabric proof's two ends).
# Imported by native/unit/status.py and native/serving/smoke.py, worker-log.py; inlined in
# place of the import when a program is sent to a node (components/native-script.ts).
import socket
import struct
import subprocess


def _addr(hexaddr):
    ip, port = hexaddr.split(":")
    if len(ip) == 8:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(ip, 16))), int(port, 16)
    raw = b"".join(struct.pack("<I", int(ip[i:i + 8], 16)) for i in range(0, 32, 8))
    return socket.inet_ntop(socket.AF_INET6, raw), int(port, 16)


def port_sockets(port):
    """Rows of /proc/net/tcp and tcp6 on local TCP `port`: (state, local ip, "peer:port", inode)."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            (lip, lport), (rip, rport) = _addr(f[1]), _addr(f[2])
            if lport == port:
                rows.append((f[3], lip, f"{rip}:{rport}", f[9]))
    return rows


def listening(port):
    """The local addresses listening on `port`, sorted."""
    return sorted({lip for state, lip, _, _ in port_sockets(port) if state == "0A"})


def established(port):
    """The peers connected to `port`, `addr:port`, sorted."""
    return sorted({peer for state, _, peer, _ in port_sockets(port) if state == "01"})


def listening_inodes(port):
    """Socket inodes listening on `port` (what a process's fds name as socket:[inode])."""
    return {inode for state, _, _, inode in port_sockets(port) if state == "0A"}


def dev_bytes(dev):
    """rx and tx bytes of interface `dev`, from /sys/class/net/<dev>/statistics."""
    base = f"/sys/class/net/{dev}/statistics"
    return int(open(f"{base}/rx_bytes").read()), int(open(f"{base}/tx_bytes").read())


def iface_of(addr):
    """The interface holding IPv4 `addr` (`ip -o -4 addr`), or "" when none does."""
    r = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10)
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) > 3 and f[2] == "inet" and f[3].split("/")[0] == addr:
            return f[1].split("@")[0]
    return ""
