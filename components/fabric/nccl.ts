// NCCL engines (vLLM, SGLang, TRT-LLM) on the fabric: the env block that follows from the
// measured topology, the container flags RDMA needs, and a checker for an NCCL_DEBUG=INFO log.
// From shared/reference: the dual-rail lab notes (NCCL_IB_HCA with both rails, SOCKET_IFNAME on
// the management interface, GID index 3: ~23.1 GB/s bus bandwidth vs ~11.2 with one HCA) and
// the 4-Spark note (NCCL silently on NET/Socket until the container gets /dev/infiniband,
// IPC_LOCK and memlock; verify `via NET/IB` > 0 and `via NET/Socket` = 0).
import type { SparkNodeFacts } from "../node/facts";

export interface NcclTopology {
  /** The RDMA devices of the node's rails, rail order (rocep1s0f1, roceP2p1s0f1). */
  readonly hcas: readonly string[];
  /** The management interface (bootstrap and OOB traffic stay off the fabric). */
  readonly socketIfname: string;
  readonly gidIndex: number;
}

/** The env block, in a stable order. */
export function ncclEnv(t: NcclTopology): Record<string, string> {
  if (t.hcas.length === 0) {
    throw new Error(
      "NCCL env: no RDMA device on any rail: NCCL_IB_HCA would be empty and NCCL would fall back to NET/Socket; fix the rails' RDMA facts first",
    );
  }
  return {
    NCCL_IB_HCA: t.hcas.join(","),
    NCCL_SOCKET_IFNAME: t.socketIfname,
    NCCL_IB_GID_INDEX: String(t.gidIndex),
    NCCL_IB_DISABLE: "0",
  };
}

/** `docker run` flags without which NCCL cannot open the HCAs inside a container. */
export const RDMA_CONTAINER_FLAGS: readonly string[] = [
  "--device=/dev/infiniband",
  "--cap-add=IPC_LOCK",
  "--ulimit",
  "memlock=-1",
];

/** The env block as `-e K=V` docker arguments followed by the RDMA container flags. */
export function dockerArgs(t: NcclTopology): string[] {
  return [
    ...Object.entries(ncclEnv(t)).flatMap(([k, v]) => ["-e", `${k}=${v}`]),
    ...RDMA_CONTAINER_FLAGS,
  ];
}

/** `export K=V` lines, for a shell or an mpirun wrapper. */
export function renderEnvBlock(t: NcclTopology): string {
  return Object.entries(ncclEnv(t))
    .map(([k, v]) => `export ${k}=${v}`)
    .join("\n");
}

/**
 * The management interface: the netdev holding `host` (the address the control node reaches
 * the node on). Null when the fact sheet has no addresses (fixture sysfs) or none matches.
 */
export function managementInterface(facts: SparkNodeFacts, host: string): string | null {
  for (const n of facts.netdevs) {
    if ((n.addresses ?? []).some((a) => a.split("/")[0] === host)) return n.name;
  }
  return null;
}

export interface NcclLogVerdict {
  readonly ok: boolean;
  readonly transport: "ib" | "socket" | "unknown";
  readonly viaIb: number;
  readonly viaSocket: number;
  /** The line that decided (first decisive line), or null. */
  readonly evidence: string | null;
  readonly message: string;
}

const PASSTHROUGH_FIX =
  "give the container the HCAs: --device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1, " +
  "make sure it has libibverbs.so (ldconfig -p | grep ibverbs inside), set NCCL_IB_DISABLE=0 and NCCL_IB_HCA to both rails' devices";

/** Judge an NCCL_DEBUG=INFO log: pass on NET/IB with `via NET/IB` > 0 and no `via NET/Socket`. */
export function checkNcclLog(text: string): NcclLogVerdict {
  const lines = text.split(/\r?\n/);
  const viaIb = lines.filter((l) => /via NET\/IB/.test(l)).length;
  const viaSocket = lines.filter((l) => /via NET\/Socket/.test(l)).length;
  const noDevice = lines.find((l) => /NET\/IB\s*:\s*No device found/.test(l));
  const socketLine = lines.find((l) => /NET\/Socket/.test(l));
  const ibLine = lines.find((l) => /via NET\/IB/.test(l)) ?? lines.find((l) => /NET\/IB/.test(l));
  const counts = `via NET/IB ${viaIb}, via NET/Socket ${viaSocket}`;
  if (noDevice) {
    return {
      ok: false,
      transport: "socket",
      viaIb,
      viaSocket,
      evidence: noDevice.trim(),
      message: `NCCL found no IB device (${counts}): the device passthrough did not take: ${PASSTHROUGH_FIX}`,
    };
  }
  if (viaSocket > 0 || (viaIb === 0 && socketLine)) {
    return {
      ok: false,
      transport: "socket",
      viaIb,
      viaSocket,
      evidence: (lines.find((l) => /via NET\/Socket/.test(l)) ?? socketLine ?? "").trim(),
      message: `NCCL is on NET/Socket, not RDMA (${counts}), which costs 2-3x decode on a Spark cluster: ${PASSTHROUGH_FIX}`,
    };
  }
  if (viaIb > 0) {
    return {
      ok: true,
      transport: "ib",
      viaIb,
      viaSocket,
      evidence: ibLine?.trim() ?? null,
      message: `NCCL is on NET/IB (${counts})`,
    };
  }
  return {
    ok: false,
    transport: "unknown",
    viaIb,
    viaSocket,
    evidence: ibLine?.trim() ?? null,
    message: `no NCCL channel lines (${counts}): run the job with NCCL_DEBUG=INFO and check its whole log, from init to the first collective`,
  };
}
