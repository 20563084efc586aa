#!/usr/bin/env python3
# The fabric probe: TCP round-trip time and throughput between two fabric addresses, run on the
# nodes (over ssh, the script on stdin: `python3 - server|client ...`). Nodes have no root and no
# tools to install, so this is Python's standard library only; never ICMP, whose RTT on a Spark
# is cpuidle exit latency (~1.2 ms on a 200G link where TCP measures ~19 us p50).
#
#   server --bind ADDR [--port 0] [--timeout 60] [--cpus 5,6,...]
#       listens on ADDR only (the fabric address, never a wildcard), prints one JSON line
#       {"listening": PORT, ...} as soon as it accepts, serves two connections (one RTT, one
#       throughput), then prints {"served": ...} and exits; gives up after --timeout seconds.
#   client --addr ADDR --port PORT [--bind LOCAL] [--count 2000] [--seconds 2] [--cpus ...]
#       RTT: --count request/response round trips of 64 bytes on one TCP_NODELAY connection,
#       p50/p99 in microseconds; throughput: bulk send for --seconds, the server counts what
#       arrived and how long it took (so the number is what crossed the wire, not what the
#       client buffered). Prints one JSON line.
#   quit --addr ADDR --port PORT
#       run on the server's node when the client failed: tells the server to stop waiting
#       (it connects to the server's own address, which works even with the link down).
#
# Both ends pin themselves to --cpus (the node's performance cores from its fact sheet; the
# runbook: p50 21.5 us on cpu19 vs 29.1 us on cpu0) with sched_setaffinity, taskset's own call,
# limited to the CPUs this process may use. Every wait is bounded.
import argparse
import json
import os
import socket
import sys
import time

MSG = 64
CHUNK = 1 << 20


def pin(cpus):
    if not cpus:
        return None
    want = {int(c) for c in cpus.split(",") if c.strip()}
    try:
        allowed = os.sched_getaffinity(0)
        use = sorted(want & allowed)
        if use:
            os.sched_setaffinity(0, use)
            return use
    except (AttributeError, OSError):
        pass
    return None


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise ConnectionError("peer closed after %d of %d bytes" % (len(buf), n))
        buf += b
    return bytes(buf)


def serve_rtt(c):
    # Echo fixed-size messages until the client closes.
    while True:
        try:
            m = recv_exact(c, MSG)
        except ConnectionError:
            return
        c.sendall(m)


def serve_bulk(c):
    got = 0
    start = None
    while True:
        b = c.recv(CHUNK)
        if not b:
            break
        if start is None:
            start = time.perf_counter()
        got += len(b)
    elapsed = time.perf_counter() - start if start is not None else 0.0
    c.sendall((json.dumps({"bytes": got, "seconds": elapsed}) + "\n").encode())


def server(a):
    pinned = pin(a.cpus)
    deadline = time.monotonic() + a.timeout
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.bind, a.port))
    ls.listen(4)
    print(json.dumps({"listening": ls.getsockname()[1], "bind": a.bind, "pinned": pinned}), flush=True)
    served = []
    while len(served) < a.connections:
        left = deadline - time.monotonic()
        if left <= 0:
            print(json.dumps({"served": served, "error": "timed out waiting for the client"}), flush=True)
            return 4
        ls.settimeout(left)
        try:
            c, peer = ls.accept()
        except socket.timeout:
            continue
        c.settimeout(max(1.0, deadline - time.monotonic()))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            kind = recv_exact(c, 1)
            if kind == b"R":
                serve_rtt(c)
            elif kind == b"T":
                serve_bulk(c)
            elif kind == b"Q":
                served.append({"kind": "Q", "peer": peer[0]})
                print(json.dumps({"served": served, "error": "the client gave up"}), flush=True)
                return 5
            served.append({"kind": kind.decode("ascii", "replace"), "peer": peer[0]})
        except (OSError, ConnectionError) as e:
            served.append({"error": "%s: %s" % (type(e).__name__, e)})
        finally:
            c.close()
    print(json.dumps({"served": served, "error": None}), flush=True)
    return 0


def connect(a, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if a.bind:
        s.bind((a.bind, 0))
    s.connect((a.addr, a.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def pct(sorted_us, q):
    if not sorted_us:
        return None
    i = min(len(sorted_us) - 1, int(round(q * (len(sorted_us) - 1))))
    return round(sorted_us[i], 1)


def client(a):
    out = {"addr": a.addr, "port": a.port, "pinned": pin(a.cpus), "rtt": None, "throughput": None, "error": None}
    try:
        s = connect(a, a.connect_timeout)
        s.sendall(b"R")
        msg = b"x" * MSG
        rtts = []
        # A few unmeasured rounds first: the first ones pay for slow start and cold caches.
        for i in range(a.count + 10):
            t = time.perf_counter()
            s.sendall(msg)
            recv_exact(s, MSG)
            if i >= 10:
                rtts.append((time.perf_counter() - t) * 1e6)
        s.close()
        rtts.sort()
        out["rtt"] = {
            "samples": len(rtts),
            "minUs": pct(rtts, 0),
            "p50Us": pct(rtts, 0.5),
            "p99Us": pct(rtts, 0.99),
            "maxUs": pct(rtts, 1),
        }
        s = connect(a, a.connect_timeout)
        s.settimeout(a.seconds + 10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.sendall(b"T")
        buf = b"\0" * CHUNK
        end = time.perf_counter() + a.seconds
        while time.perf_counter() < end:
            s.sendall(buf)
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while not reply.endswith(b"\n"):
            b = s.recv(4096)
            if not b:
                break
            reply += b
        s.close()
        r = json.loads(reply.decode() or "{}")
        secs = r.get("seconds") or 0.0
        got = r.get("bytes") or 0
        out["throughput"] = {
            "bytes": got,
            "seconds": round(secs, 3),
            "gbps": round(got * 8 / secs / 1e9, 3) if secs > 0 else None,
        }
    except (OSError, ConnectionError, ValueError) as e:
        out["error"] = "%s: %s" % (type(e).__name__, getattr(e, "strerror", None) or e)
    print(json.dumps(out), flush=True)
    return 0 if out["error"] is None else 3


def quit_server(a):
    s = socket.create_connection((a.addr, a.port), timeout=3)
    s.sendall(b"Q")
    s.close()
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="rail-rtt-throughput.py")
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--timeout", type=float, default=60)
    s.add_argument("--connections", type=int, default=2)
    s.add_argument("--cpus", default="")
    c = sub.add_parser("client")
    c.add_argument("--addr", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--bind", default="")
    c.add_argument("--count", type=int, default=2000)
    c.add_argument("--seconds", type=float, default=2.0)
    c.add_argument("--connect-timeout", type=float, default=3.0)
    c.add_argument("--cpus", default="")
    q = sub.add_parser("quit")
    q.add_argument("--addr", required=True)
    q.add_argument("--port", type=int, required=True)
    a = p.parse_args(argv)
    if a.mode == "server":
        return server(a)
    return client(a) if a.mode == "client" else quit_server(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
