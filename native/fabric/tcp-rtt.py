#!/usr/bin/env python3
# tcp-rtt.py — the TCP round trip from a node to a fabric address: connect time to the peer's
# sshd (SYN -> SYN/ACK), plus the first bytes of its banner as proof the far end answered.
# Never ICMP: a fabric may filter it, and a ping says nothing about the path a TCP transport
# takes. Runs INSIDE a node (Python 3 standard library only); the simulated cluster runs it
# (sim/probe.ts, sim/index.ts) to prove its fabric links; sim/probe.ts parses the output.
#
# Usage: tcp-rtt.py ADDR PORT COUNT   prints ONE JSON object: addr, port, samples, error (the
# first connect failure, or null), banner, and minUs/p50Us/maxUs when any sample succeeded.

import json, socket, sys, time
addr, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rtts, banner, err = [], "", None
for i in range(count):
    t = time.perf_counter()
    try:
        s = socket.create_connection((addr, port), timeout=2)
    except OSError as e:
        err = "%s: %s" % (type(e).__name__, e.strerror or e)
        break
    rtts.append((time.perf_counter() - t) * 1e6)
    if i == 0:
        s.settimeout(2)
        try:
            banner = s.recv(64).decode("ascii", "replace").strip()
        except OSError:
            pass
    s.close()
rtts.sort()
out = {"addr": addr, "port": port, "samples": len(rtts), "error": err, "banner": banner}
if rtts:
    out.update(minUs=round(rtts[0], 1), p50Us=round(rtts[len(rtts) // 2], 1), maxUs=round(rtts[-1], 1))
print(json.dumps(out))
