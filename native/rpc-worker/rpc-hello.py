# Runs on the CLIENT node (the control node cannot reach the fabric): a real RPC HELLO to a
# worker over the fabric, as the bundled llama.cpp speaks it (ggml/src/ggml-rpc/ggml-rpc.cpp at
# 80fb11ac, protocol 6.0.0), then DEVICE_COUNT and GET_DEVICE_MEMORY per device. Stdlib only.
#   request: cmd (1 byte) | payload size (8 bytes LE) | payload;  reply: size (8 LE) | payload
#   HELLO (14): payload conn_caps[24], all zero = stay on TCP; reply 28 bytes
#               {major, minor, patch, padding, conn_caps[24]}. A wrong size makes it close.
#   DEVICE_COUNT (15): empty payload; reply uint32.
#   GET_DEVICE_MEMORY (11): uint32 device; reply {uint64 free, uint64 total}.
# The server serves one client at a time (listen backlog 1, sequential accept): while a client
# is connected, a connect may still complete into the backlog and HELLO gets no answer. Every
# wait is bounded; the outcome is one JSON line on stdout, exit 0 (the caller judges it).
# Arguments: HOST PORT TIMEOUT_S HEADER (the client build's ggml/include/ggml-rpc.h, or "").
import json
import re
import socket
import struct
import sys

HELLO, DEVICE_COUNT, GET_DEVICE_MEMORY = 14, 15, 11
CONN_CAPS = 24


def client_version(header):
    if not header:
        return None
    try:
        text = open(header, encoding="utf-8", errors="replace").read()
    except OSError as e:
        return {"error": f"cannot read {header}: {e.strerror}"}
    v = {}
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"#define\s+RPC_PROTO_%s_VERSION\s+(\d+)" % part, text)
        if not m:
            return {"error": f"{header} has no RPC_PROTO_{part}_VERSION"}
        v[part.lower()] = int(m.group(1))
    return "%d.%d.%d" % (v["major"], v["minor"], v["patch"])


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"the server closed the connection after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def call(s, cmd, payload, want):
    s.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
    (size,) = struct.unpack("<Q", recv_exact(s, 8))
    if size != want:
        raise ValueError(f"command {cmd}: reply of {size} bytes, expected {want}")
    return recv_exact(s, size)


def main(argv):
    host, port, timeout, header = argv[0], int(argv[1]), float(argv[2]), argv[3]
    out = {"endpoint": f"{host}:{port}", "clientVersion": client_version(header)}
    try:
        s = socket.create_connection((host, port), timeout=timeout)
    except socket.timeout:
        out.update(ok=False, state="unreachable", error=f"no TCP connection within {timeout} s")
        return out
    except OSError as e:
        out.update(ok=False, state="refused" if isinstance(e, ConnectionRefusedError) else "unreachable", error=str(e))
        return out
    stage = "HELLO"
    try:
        s.settimeout(timeout)
        r = call(s, HELLO, bytes(CONN_CAPS), 4 + CONN_CAPS)
        out["version"] = "%d.%d.%d" % (r[0], r[1], r[2])
        out["serverCaps"] = r[4:].hex()
        stage = "DEVICE_COUNT"
        (count,) = struct.unpack("<I", call(s, DEVICE_COUNT, b"", 4))
        devices = []
        stage = "GET_DEVICE_MEMORY"
        for d in range(count):
            free, total = struct.unpack("<QQ", call(s, GET_DEVICE_MEMORY, struct.pack("<I", d), 16))
            devices.append({"device": d, "free": free, "total": total})
        out.update(ok=True, state="ok", devices=devices)
    except socket.timeout:
        # Connected but unanswered: the server is serving another client (or wedged); the
        # caller tells which from the worker's socket table.
        out.update(ok=False, state="no-answer", error=f"no answer to {stage} within {timeout} s")
    except (OSError, ValueError) as e:
        out.update(ok=False, state="protocol", error=f"{stage}: {e}")
    finally:
        s.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
