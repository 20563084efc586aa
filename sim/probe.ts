// Measurements taken inside nodes: the TCP round trip to a fabric address (connect time to the
// peer's sshd: SYN → SYN/ACK, plus the banner as proof the far end answered), never ICMP.
// The program is native/fabric/tcp-rtt.py; this module runs and parses it.
import { nativeProgram } from "../components/native-script";
import type { RunResult } from "./exec";

/** native/fabric/tcp-rtt.py (through the loader: the text a node is sent). Args: ADDR PORT COUNT. */
export const tcpRttScript = nativeProgram("fabric/tcp-rtt.py").text;

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
