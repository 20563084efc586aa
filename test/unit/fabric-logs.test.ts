// The NCCL log checker and the rpc-server transport parser, on logs written from the forms the
// references quote (the 4-Spark note's `via NET/IB` / `NET/IB : No device found`, the runbook's
// `RDMA probed`/`RDMA activated` lines) and the bundled llama.cpp's exact format strings.
import { describe, expect, it } from "vitest";
import {
  checkNcclLog,
  dockerArgs,
  managementInterface,
  ncclEnv,
  renderEnvBlock,
} from "../../components/fabric/nccl";
import { parseRpcTransport } from "../../components/fabric/rpc-log";
import type { SparkNodeFacts } from "../../components/node/facts";

const IB_LOG = `
sparkone:12345:12345 [0] NCCL INFO Bootstrap : Using enP7s7:192.168.86.44<0>
sparkone:12345:12345 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enP7s7:192.168.86.44<0>
sparkone:12345:12345 [0] NCCL INFO Using network IB
sparkone:12345:12401 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0
sparkone:12345:12401 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1
sparkone:12345:12401 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0
`;

const SOCKET_LOG = `
spark-1:77:77 [0] NCCL INFO NET/Socket : Using [0]enP7s7:192.168.86.44<0>
spark-1:77:77 [0] NCCL INFO Using network Socket
spark-1:77:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
spark-1:77:90 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0
`;

const NO_DEVICE_LOG = `
spark-1:77:77 [0] NCCL INFO NET/IB : No device found.
spark-1:77:77 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>
spark-1:77:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
`;

describe("checkNcclLog", () => {
  it("passes NET/IB with via NET/IB > 0 and no socket channels", () => {
    expect(checkNcclLog(IB_LOG)).toEqual({
      ok: true,
      transport: "ib",
      viaIb: 3,
      viaSocket: 0,
      evidence:
        "sparkone:12345:12401 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
      message: "NCCL is on NET/IB (via NET/IB 3, via NET/Socket 0)",
    });
  });

  it("fails NET/Socket with the passthrough fix", () => {
    const v = checkNcclLog(SOCKET_LOG);
    expect(v).toMatchObject({ ok: false, transport: "socket", viaIb: 0, viaSocket: 2 });
    expect(v.evidence).toBe(
      "spark-1:77:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
    );
    expect(v.message).toBe(
      "NCCL is on NET/Socket, not RDMA (via NET/IB 0, via NET/Socket 2), which costs 2-3x decode on a Spark cluster: give the container the HCAs: --device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1, make sure it has libibverbs.so (ldconfig -p | grep ibverbs inside), set NCCL_IB_DISABLE=0 and NCCL_IB_HCA to both rails' devices",
    );
  });

  it("fails `NET/IB : No device found` first, saying the passthrough did not take", () => {
    const v = checkNcclLog(NO_DEVICE_LOG);
    expect(v.ok).toBe(false);
    expect(v.evidence).toBe("spark-1:77:77 [0] NCCL INFO NET/IB : No device found.");
    expect(v.message).toMatch(
      /^NCCL found no IB device \(via NET\/IB 0, via NET\/Socket 1\): the device passthrough did not take: give the container the HCAs: --device=\/dev\/infiniband/,
    );
  });

  it("fails a mixed log (some channels on sockets) and one without NCCL lines", () => {
    expect(checkNcclLog(IB_LOG + SOCKET_LOG).ok).toBe(false);
    const none = checkNcclLog("hello\nworld\n");
    expect(none).toMatchObject({ ok: false, transport: "unknown", evidence: null });
    expect(none.message).toMatch(/run the job with NCCL_DEBUG=INFO/);
  });
});

describe("NCCL env block", () => {
  const topo = {
    hcas: ["rocep1s0f1", "roceP2p1s0f1"],
    socketIfname: "enP7s7",
    gidIndex: 3,
  };
  it("lists both rails, the management interface and the GID index (the lab's winner)", () => {
    expect(ncclEnv(topo)).toEqual({
      NCCL_IB_HCA: "rocep1s0f1,roceP2p1s0f1",
      NCCL_SOCKET_IFNAME: "enP7s7",
      NCCL_IB_GID_INDEX: "3",
      NCCL_IB_DISABLE: "0",
    });
    expect(renderEnvBlock(topo)).toBe(
      "export NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1\nexport NCCL_SOCKET_IFNAME=enP7s7\nexport NCCL_IB_GID_INDEX=3\nexport NCCL_IB_DISABLE=0",
    );
    expect(dockerArgs(topo)).toEqual([
      "-e",
      "NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1",
      "-e",
      "NCCL_SOCKET_IFNAME=enP7s7",
      "-e",
      "NCCL_IB_GID_INDEX=3",
      "-e",
      "NCCL_IB_DISABLE=0",
      "--device=/dev/infiniband",
      "--cap-add=IPC_LOCK",
      "--ulimit",
      "memlock=-1",
    ]);
  });
  it("refuses an empty HCA list", () => {
    expect(() => ncclEnv({ ...topo, hcas: [] })).toThrow(/NCCL_IB_HCA would be empty/);
  });
  it("finds the management interface by the node's ssh address", () => {
    const facts = {
      netdevs: [
        { name: "fabric0", addresses: ["10.214.7.1/24"] },
        { name: "mgmt0", addresses: ["10.213.4.11/24", "fe80::1/64"] },
      ],
    } as unknown as SparkNodeFacts;
    expect(managementInterface(facts, "10.213.4.11")).toBe("mgmt0");
    expect(managementInterface(facts, "10.9.9.9")).toBeNull();
  });
});

// The banner exactly as ggml-rpc.cpp prints it (two leading spaces, padded label).
const BANNER_RDMA = "  transport      : TCP (RDMA auto-negotiate enabled)";
const BANNER_TCP = "  transport      : TCP";

describe("parseRpcTransport", () => {
  it("RDMA activated (the runbook's lines) is rdma, with the probe and activation parsed", () => {
    const log = [
      "Starting RPC server v3.0.0",
      "  endpoint       : 10.214.7.2:50052",
      BANNER_RDMA,
      "Accepted client connection",
      "RDMA probed: dev=rocep1s0f1 gid=3 RoCEv2 qpn=33437 inline=316",
      "RDMA activated: qpn=33437->33437 mtu=4096 rx_depth=24",
    ].join("\n");
    expect(parseRpcTransport(log)).toEqual({
      transport: "rdma",
      evidence: "RDMA activated: qpn=33437->33437 mtu=4096 rx_depth=24",
      rdmaBuilt: true,
      probed: { dev: "rocep1s0f1", gidIndex: 3, gidType: "RoCEv2", qpn: 33437, inline: 316 },
      activated: { localQpn: 33437, remoteQpn: 33437, mtu: 4096, rxDepth: 24 },
      reason: "RDMA active (mtu 4096, rocep1s0f1 GID 3 RoCEv2)",
    });
  });

  it("the TCP fallback line is tcp, with the fix", () => {
    const r = parseRpcTransport(
      `${BANNER_RDMA}\nRDMA probed: dev=rocep1s0f1 gid=3 RoCEv1 qpn=12 inline=316\nRDMA activate failed, staying on TCP\n`,
    );
    expect(r.transport).toBe("tcp");
    expect(r.evidence).toBe("RDMA activate failed, staying on TCP");
    expect(r.probed?.gidType).toBe("RoCEv1");
    expect(r.reason).toMatch(/check the GID index \(RoCE v2 at 3\) and the MTU on both ends/);
  });

  it("the last connection wins", () => {
    const r = parseRpcTransport(
      "RDMA activated: qpn=1->2 mtu=4096 rx_depth=24\nRDMA activate failed, staying on TCP\n",
    );
    expect(r.transport).toBe("tcp");
    expect(
      parseRpcTransport(
        "RDMA activate failed, staying on TCP\nRDMA activated: qpn=1->2 mtu=1024 rx_depth=24\n",
      ).activated,
    ).toEqual({ localQpn: 1, remoteQpn: 2, mtu: 1024, rxDepth: 24 });
  });

  it("only the banner: tcp, and whether RDMA was built in", () => {
    expect(parseRpcTransport(`${BANNER_RDMA}\n`)).toMatchObject({
      transport: "tcp",
      evidence: "transport      : TCP (RDMA auto-negotiate enabled)",
      rdmaBuilt: true,
    });
    expect(parseRpcTransport(`${BANNER_TCP}\n`)).toMatchObject({
      transport: "tcp",
      evidence: "transport      : TCP",
      rdmaBuilt: false,
      reason: expect.stringMatching(/^built without RDMA/),
    });
    expect(parseRpcTransport("nothing here")).toMatchObject({
      transport: "tcp",
      evidence: null,
      rdmaBuilt: null,
    });
  });
});
