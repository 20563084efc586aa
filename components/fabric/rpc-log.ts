// Which transport a ggml rpc-server connection got, from its log: the only signal there is (the
// runbook, "RDMA versus TCP": selection is silent auto-negotiation, no env var, no scheme).
// The strings are the bundled llama.cpp's (ggml/src/ggml-rpc/transport.cpp, ggml-rpc.cpp):
//   RDMA probed: dev=%s gid=%d%s qpn=%u inline=%u          (%s: " RoCEv2" / " RoCEv1" / "")
//   RDMA activated: qpn=%u->%u mtu=%d rx_depth=%d
//   RDMA activate failed, staying on TCP
//   transport      : TCP (RDMA auto-negotiate enabled)     (built with GGML_RPC_RDMA)
//   transport      : TCP                                   (built without)
// The last connection's outcome wins: a log holds one line per accepted connection.

export interface RdmaProbed {
  readonly dev: string;
  readonly gidIndex: number;
  readonly gidType: "RoCEv2" | "RoCEv1" | null;
  readonly qpn: number;
  readonly inline: number | null;
}

export interface RdmaActivated {
  readonly localQpn: number;
  readonly remoteQpn: number;
  readonly mtu: number;
  readonly rxDepth: number;
}

export interface RpcTransport {
  readonly transport: "rdma" | "tcp";
  /** The line that decided, or null when the log holds none of the lines above. */
  readonly evidence: string | null;
  /** Whether the server was built with RDMA (from the banner); null when no banner was seen. */
  readonly rdmaBuilt: boolean | null;
  readonly probed: RdmaProbed | null;
  readonly activated: RdmaActivated | null;
  readonly reason: string;
}

const PROBED = /RDMA probed: dev=(\S+) gid=(\d+)(?: (RoCEv2|RoCEv1))? qpn=(\d+)(?: inline=(\d+))?/;
const ACTIVATED = /RDMA activated: qpn=(\d+)->(\d+) mtu=(\d+) rx_depth=(\d+)/;
const FAILED = /RDMA activate failed, staying on TCP/;
const BANNER = /^\s*transport\s*:\s*(TCP(?: \(RDMA auto-negotiate enabled\))?)\s*$/;

export function parseRpcTransport(log: string): RpcTransport {
  let rdmaBuilt: boolean | null = null;
  let banner: string | null = null;
  let probed: RdmaProbed | null = null;
  let last: { line: string; activated: RdmaActivated | null } | null = null;
  for (const raw of log.split(/\r?\n/)) {
    const line = raw.trim();
    const b = BANNER.exec(raw);
    if (b) {
      banner = line;
      rdmaBuilt = b[1] !== "TCP";
      continue;
    }
    const p = PROBED.exec(line);
    if (p) {
      probed = {
        dev: p[1] as string,
        gidIndex: Number(p[2]),
        gidType: (p[3] as "RoCEv2" | "RoCEv1" | undefined) ?? null,
        qpn: Number(p[4]),
        inline: p[5] === undefined ? null : Number(p[5]),
      };
      continue;
    }
    const a = ACTIVATED.exec(line);
    if (a) {
      last = {
        line,
        activated: {
          localQpn: Number(a[1]),
          remoteQpn: Number(a[2]),
          mtu: Number(a[3]),
          rxDepth: Number(a[4]),
        },
      };
      continue;
    }
    if (FAILED.test(line)) last = { line, activated: null };
  }
  if (last?.activated) {
    return {
      transport: "rdma",
      evidence: last.line,
      rdmaBuilt: rdmaBuilt ?? true,
      probed,
      activated: last.activated,
      reason: `RDMA active (mtu ${last.activated.mtu}${probed ? `, ${probed.dev} GID ${probed.gidIndex}${probed.gidType ? ` ${probed.gidType}` : ""}` : ""})`,
    };
  }
  if (last) {
    return {
      transport: "tcp",
      evidence: last.line,
      rdmaBuilt: rdmaBuilt ?? true,
      probed,
      activated: null,
      reason:
        "RDMA negotiation failed and the connection stayed on TCP (about a tenth of decode): check the GID index (RoCE v2 at 3) and the MTU on both ends, and that the client was built with RDMA too",
    };
  }
  if (banner) {
    return {
      transport: "tcp",
      evidence: banner,
      rdmaBuilt,
      probed,
      activated: null,
      reason: rdmaBuilt
        ? "built with RDMA, but no connection has activated it yet (or the log lacks GGML_RPC_DEBUG=1 lines): connect a client and look again"
        : "built without RDMA (LLAMA_RPC_RDMA=0 or no libibverbs at build time): TCP only",
    };
  }
  return {
    transport: "tcp",
    evidence: null,
    rdmaBuilt: null,
    probed,
    activated: null,
    reason:
      "no transport lines in the log: start the worker with GGML_RPC_DEBUG=1 and read its log from the start",
  };
}
