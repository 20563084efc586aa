// Measurements taken inside nodes: the TCP round trip to a fabric address (connect time to the
// peer's sshd: SYN → SYN/ACK, plus the banner as proof the far end answered), never ICMP.
import type { RunResult } from "./exec";

export const tcpRttScript = String.raw`
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
`;

export interface TcpRtt {
  addr: string;
  port: number;
  samples: number;
  error: string | null;
  banner: string;
  minUs?: number;
  p50Us?: number;
  maxUs?: number;
}

export function tcpRttArgv(addr: string, port = 22, count = 20): string[] {
  return ["python3", "-c", tcpRttScript, addr, String(port), String(count)];
}

export function parseTcpRtt(r: RunResult): TcpRtt {
  const line = r.stdout.trim().split("\n").pop() ?? "";
  try {
    return JSON.parse(line) as TcpRtt;
  } catch {
    return {
      addr: "",
      port: 0,
      samples: 0,
      error: (r.stderr || r.stdout).trim() || `exit ${r.exitCode}`,
      banner: "",
    };
  }
}
