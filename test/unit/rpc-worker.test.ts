// RpcWorker's pure parts, its policies, and the HELLO probe against a server speaking the
// protocol as ggml-rpc.cpp (80fb11ac) does; the e2e runs the real ggml-rpc-server.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { parseStackConfig } from "../../components/stack-config";
import { programPath } from "../../components/native-script";
import { driftReasons, judgeHealth } from "../../components/rpc-worker/verdicts";
import { identityMismatch, unsafeBind } from "../../components/rpc-worker/gate";
import type { ProbeResult } from "../../components/rpc-worker/node-output";
import type { UnitState, WorkerStatus } from "../../components/rpc-worker/state";
import { checkBuildsIdentical } from "../../policies/build";
import { checkBoundToFabric, checkRssGuard, checkVersionMatch } from "../../policies/rpc";

const unit = (over: Partial<UnitState> = {}): UnitState => ({
  ActiveState: "active",
  SubState: "running",
  Result: "success",
  NRestarts: "0",
  InvocationID: "aaaa1111",
  MainPID: "42",
  ExecMainStatus: "0",
  ...over,
});
const D = "a".repeat(64);
const status = (over: Partial<WorkerStatus> = {}): WorkerStatus => ({
  worker: unit(),
  guard: unit({ InvocationID: "g" }),
  runningDigest: D,
  binaryDigest: D,
  listening: ["10.0.0.2"],
  established: [],
  log: [],
  guardLog: [],
  ...over,
});

describe("unsafeBind", () => {
  it.each([
    ["0.0.0.0", "the wildcard address"],
    ["::", "the wildcard address"],
    ["192.168.1.5", "management address"],
    ["127.0.0.1", "loopback, and the client is another node"],
    ["spark-2", "not an IP address"],
  ])("%s is refused (%s)", (bind, why) => {
    expect(unsafeBind(bind, { managementAddress: "192.168.1.5", remoteClient: true })).toContain(
      why,
    );
  });
  it("a fabric address is fine", () => {
    expect(unsafeBind("10.0.0.2", { managementAddress: "192.168.1.5", remoteClient: true })).toBe(
      undefined,
    );
  });
});

describe("unsafeBind compares addresses, not spellings", () => {
  // Each of these passed a string comparison: another spelling of the wildcard, of loopback,
  // or of the management address reaches the same socket.
  it.each([
    ["0::", "fd00::5", '"0::" is the wildcard address (every interface, the LAN included)'],
    ["::0", "fd00::5", '"::0" is the wildcard address (every interface, the LAN included)'],
    [
      "::ffff:0.0.0.0",
      "fd00::5",
      '"::ffff:0.0.0.0" is the wildcard address (every interface, the LAN included)',
    ],
    ["0:0:0:0:0:0:0:1", "fd00::5", "0:0:0:0:0:0:0:1 is loopback, and the client is another node"],
    ["::ffff:127.0.0.1", "fd00::5", "::ffff:127.0.0.1 is loopback, and the client is another node"],
    ["127.3.2.1", "fd00::5", "127.3.2.1 is loopback, and the client is another node"],
    [
      "fd00:0:0::5",
      "fd00::5",
      "fd00:0:0::5 is the node's management address (fd00::5) (the LAN the control node reaches)",
    ],
    [
      "::ffff:192.168.1.5",
      "192.168.1.5",
      "::ffff:192.168.1.5 is the node's management address (192.168.1.5) (the LAN the control node reaches)",
    ],
  ])("%s with management %s is refused", (bind, managementAddress, why) => {
    expect(unsafeBind(bind, { managementAddress, remoteClient: true })).toBe(why);
  });
  it("loopback is fine when the client is on the same node; another address is", () => {
    expect(
      unsafeBind("0:0:0:0:0:0:0:1", { managementAddress: "fd00::5", remoteClient: false }),
    ).toBe(undefined);
    expect(unsafeBind("fd00::6", { managementAddress: "fd00::5", remoteClient: true })).toBe(
      undefined,
    );
  });
});

describe("judgeHealth", () => {
  const noAnswer: ProbeResult = {
    endpoint: "10.0.0.2:50052",
    ok: false,
    state: "no-answer",
    error: "no answer to HELLO within 5 s",
  };
  it("no answer while the cluster's client is connected is busy, and healthy", () => {
    expect(judgeHealth(noAnswer, { established: ["10.0.0.1:41000"] }, "10.0.0.1")).toEqual({
      state: "busy",
      detail: "busy: serving 10.0.0.1:41000",
    });
  });
  it("no TCP connection while the cluster's client is connected is busy too (the accept queue is full)", () => {
    const unreachable: ProbeResult = {
      ...noAnswer,
      state: "unreachable",
      error: "no TCP connection within 5.0 s",
    };
    expect(judgeHealth(unreachable, { established: ["10.0.0.1:41000"] }, "10.0.0.1").state).toBe(
      "busy",
    );
    expect(judgeHealth(unreachable, { established: [] }, "10.0.0.1")).toEqual({
      state: "down",
      detail: "unreachable: no TCP connection within 5.0 s",
    });
  });
  it("no answer while a stranger is connected is down, naming it", () => {
    expect(judgeHealth(noAnswer, { established: ["10.0.0.9:5"] }, "10.0.0.1").detail).toBe(
      "no answer to HELLO: serving 10.0.0.9:5, which is not the cluster's client (10.0.0.1)",
    );
  });
  it("an answer reports version and memory", () => {
    const ok: ProbeResult = {
      endpoint: "e",
      ok: true,
      state: "ok",
      version: "6.0.0",
      devices: [{ device: 0, free: 2 ** 30, total: 2 ** 31 }],
    };
    expect(judgeHealth(ok, { established: [] }, "10.0.0.1").detail).toBe(
      "HELLO 6.0.0 from 10.0.0.1; device 0: 1024 of 2048 MiB free",
    );
  });
});

describe("driftReasons", () => {
  const base = {
    started: { invocationId: "aaaa1111", nRestarts: "0" },
    expectedDigest: D,
    bind: "10.0.0.2",
    guardOn: true,
  };
  it("the unit as started is no drift", () =>
    expect(driftReasons({ ...base, status: status() })).toEqual([]));
  it("a restart hidden by Restart=on-failure is drift", () => {
    expect(
      driftReasons({
        ...base,
        status: status({ worker: unit({ NRestarts: "1", InvocationID: "bbbb2222" }) }),
      }),
    ).toEqual([
      "worker restarted 1 times (was 0 at start)",
      "worker invocation changed (aaaa1111 → bbbb2222)",
    ]);
  });
  it("a stopped unit, a changed binary and a dead guard are drift", () => {
    expect(
      driftReasons({
        ...base,
        status: status({
          worker: unit({ ActiveState: "inactive", SubState: "dead" }),
          binaryDigest: "b".repeat(64),
          runningDigest: "",
          guard: unit({ ActiveState: "failed", SubState: "failed" }),
        }),
      }),
    ).toEqual([
      "worker unit is inactive/dead (result success)",
      `binary sha256 bbbbbbbbbbbb is not the build's aaaaaaaaaaaa`,
      "RSS guard unit is failed/failed (result success): nothing stops the worker before the node runs out of memory",
    ]);
  });
});

describe("identityMismatch names both builds", () => {
  it("patch and digest", () => {
    expect(
      identityMismatch({
        worker: { node: "spark-2", version: "6.0.1", digest: "b".repeat(64), installDir: "/w" },
        client: { node: "spark-1", version: "6.0.0", digest: D, installDir: "/c" },
      }),
    ).toEqual([
      "RPC version: worker spark-2 answers 6.0.1, the client spark-1's build is 6.0.0",
      `ggml-rpc-server sha256: worker spark-2 runs ${"b".repeat(64)} (/w), the client spark-1's build has ${D} (/c): ` +
        "rebuild both from one tree, flags and compiler (`pulumi up`); the builds-identical policy names which of them differs.",
    ]);
  });
});

describe("policies/rpc.ts", () => {
  const w = {
    bind: "10.0.0.2",
    fabricAddresses: ["10.0.0.2"],
    managementAddress: "192.168.1.5",
    rssLimitPercent: 92,
    client: { target: { name: "spark-1" } },
    workerBuild: { installDir: "/w", digest: D },
    clientBuild: { installDir: "/c", digest: D, header: "h" },
    version: "6.0.0",
    clientVersion: "6.0.0",
    digest: D,
    status: status(),
  } as unknown as Parameters<typeof checkBoundToFabric>[1];
  it("a fabric-bound, guarded, matching worker passes all three", () => {
    expect([
      ...checkBoundToFabric("spark-2", w),
      ...checkRssGuard("spark-2", w),
      ...checkVersionMatch("spark-2", w),
    ]).toEqual([]);
  });
  it("rpc-bound-to-fabric", () => {
    expect(
      checkBoundToFabric("spark-2", {
        ...w,
        bind: "0.0.0.0",
        status: status({ listening: ["0.0.0.0"] }),
      }),
    ).toEqual([
      'The rpc worker on spark-2 must not bind there: "0.0.0.0" is the wildcard address (every interface, the LAN included). Bind its fabric address (sparkform:nodes[].fabricAddress); the server has no authentication.',
    ]);
    expect(checkBoundToFabric("spark-2", { ...w, bind: "10.9.9.9" })).toEqual([
      "The rpc worker on spark-2 binds 10.9.9.9, which is not one of its fabric addresses (10.0.0.2): bind a fabric address.",
      "The rpc worker's port on spark-2 is listened on at 10.0.0.2, not only 10.9.9.9: stop whatever else listens there and run `pulumi up`.",
    ]);
  });
  it("rss-guard-on", () => {
    expect(checkRssGuard("spark-2", { ...w, rssLimitPercent: 100 })[0]).toContain(
      "has no RSS guard (rssLimitPercent 100)",
    );
    expect(checkRssGuard("spark-2", { ...w, rssLimitPercent: 0 })[0]).toContain(
      "set sparkform:worker.rssLimitPercent below 100",
    );
  });
  it("worker-version-match", () => {
    expect(
      checkVersionMatch("spark-2", {
        ...w,
        version: "6.0.1",
        workerBuild: { installDir: "/w", digest: "b".repeat(64) },
      }),
    ).toEqual([
      "The rpc worker on spark-2 has ggml-rpc-server bbbbbbbbbbbb (/w), the client spark-1's build aaaaaaaaaaaa (/c): rebuild both from one tree, flags and compiler (`pulumi up`); the builds-identical policy names which of them differs.",
      "The rpc worker on spark-2 answers RPC 6.0.1, the client spark-1's build is 6.0.0: HELLO ignores the patch, and drifted builds misread each other's op codes; rebuild both from one tree, flags and compiler (`pulumi up`); the builds-identical policy names which of them differs.",
    ]);
  });
});

describe("sparkform:worker config", () => {
  const nodes = [
    {
      name: "spark-1",
      host: "192.168.1.4",
      user: "spark",
      fabricAddress: "10.0.0.1",
      hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFCod6bRWGwLtlzntUxO1uJl002LYJe2aeFp5qJjJQNv",
    },
    {
      name: "spark-2",
      host: "192.168.1.5",
      user: "spark",
      fabricAddress: "10.0.0.2",
      hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM5STLYo7tLn83anQ70JRgEfJR3Sp5wbs6RG4ZMhy44c",
    },
  ];
  const tree = { source: "/tmp", dest: "~/src/llama.cpp" };
  it("defaults: the first node is the client, port 50052, cache on, guard at 92%", () => {
    const c = parseStackConfig({
      nodes,
      tree,
      build: { preset: "sim" },
      worker: { nodes: ["spark-2"] },
    });
    expect(c.worker).toEqual({
      nodes: ["spark-2"],
      client: "spark-1",
      port: 50052,
      threads: 0,
      devices: [],
      cache: true,
      debug: true,
      rssLimitPercent: 92,
      rssIntervalSeconds: 2,
    });
  });
  it("the client as a worker is an error naming the key", () => {
    expect(() =>
      parseStackConfig({ nodes, tree, build: { preset: "sim" }, worker: { nodes: ["spark-1"] } }),
    ).toThrow(
      'sparkform:worker.nodes[0]: "spark-1" is the client node; list only the other nodes, or set worker.client',
    );
  });
});

// A server that speaks HELLO / DEVICE_COUNT / GET_DEVICE_MEMORY exactly as rpc_serve_client
// does (sizes checked, a wrong HELLO size closes), or accepts and never answers ("busy").
const FAKE = `
import socket, struct, sys
mode = sys.argv[1]
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
if mode == "busy":
    import time; time.sleep(30)
def rx(n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x: sys.exit(0)
        b += x
    return b
cmd = rx(1)[0]; (size,) = struct.unpack("<Q", rx(8))
if cmd != 14 or size != 24: sys.exit(0)
rx(24); c.sendall(struct.pack("<Q", 28) + bytes([6, 0, 0, 0]) + bytes(24))
while True:
    cmd = rx(1)[0]; (size,) = struct.unpack("<Q", rx(8)); p = rx(size)
    if cmd == 15 and size == 0: c.sendall(struct.pack("<QI", 4, 1))
    elif cmd == 11 and size == 4: c.sendall(struct.pack("<QQQ", 16, 1 << 30, 2 << 30))
    else: sys.exit(0)
`;

function withFake(mode: "serve" | "busy", timeout: string): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(path.join(tmpdir(), "rpc-probe-"));
  writeFileSync(path.join(dir, "fake.py"), FAKE);
  const header = path.join(dir, "ggml-rpc.h");
  writeFileSync(
    header,
    "#define RPC_PROTO_MAJOR_VERSION    6\n#define RPC_PROTO_MINOR_VERSION    0\n#define RPC_PROTO_PATCH_VERSION    0\n",
  );
  const server = spawn("python3", [path.join(dir, "fake.py"), mode]);
  return new Promise((resolve, reject) => {
    server.stdout.once("data", (d: Buffer) => {
      try {
        const out = execFileSync(
          "python3",
          [
            programPath("rpc-worker/rpc-hello.py"),
            "127.0.0.1",
            d.toString().trim(),
            timeout,
            header,
          ],
          { encoding: "utf8" },
        );
        resolve(JSON.parse(out) as Record<string, unknown>);
      } catch (e) {
        reject(e as Error);
      } finally {
        server.kill();
      }
    });
  });
}

describe("native/rpc-worker/rpc-hello.py", () => {
  it("HELLO, DEVICE_COUNT and GET_DEVICE_MEMORY as the protocol defines them", async () => {
    expect(await withFake("serve", "5")).toMatchObject({
      ok: true,
      state: "ok",
      version: "6.0.0",
      clientVersion: "6.0.0",
      devices: [{ device: 0, free: 2 ** 30, total: 2 ** 31 }],
    });
  });
  it("a server serving someone else: bounded wait, no-answer", async () => {
    const t0 = Date.now();
    expect(await withFake("busy", "1")).toMatchObject({
      ok: false,
      state: "no-answer",
      error: "no answer to HELLO within 1.0 s",
    });
    // Its own timeout ended the wait (the server holds the connection 30 s): not before 1 s.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
  });
});

describe("every gate that compares builds names the measured cause", () => {
  // Issue 22's case: spark-2's compiler wrapped to add -O1 (same version line, another binary),
  // a one-line edit synced to both trees (equal digests): the artifacts differ, and the cause
  // is the compiler, not the tree.
  const c = "1".repeat(40);
  const inputs = (cxx: string) => ({
    treeDigest: "a".repeat(64),
    flags: { LLAMA_BACKEND: "cpu", LLAMA_COMMIT: c },
    compiler: "gcc (Debian 12.2.0-14) 12.2.0",
    compilerDigests: { cxx: cxx.repeat(64), cc: "e".repeat(64), nvcc: "", nvccVersion: "" },
    builtBy: "self",
  });
  const client = { node: "spark-1", builtOn: "spark-1", ...inputs("c") };
  const worker = { node: "spark-2", builtOn: "spark-2", ...inputs("d") };
  const cause =
    "built from different inputs (compiler gcc (Debian 12.2.0-14) 12.2.0 sha256 cccccccccccc… on " +
    "spark-1 vs gcc (Debian 12.2.0-14) 12.2.0 sha256 dddddddddddd… on spark-2)";
  const fix =
    "make them equal (the same tree, sparkform:build flags and compiler on every node) and run " +
    "`pulumi up`, or set sparkform:build.distribute: fan-out so one node builds and the others " +
    "receive its artifacts.";
  const B = "b".repeat(64);

  it("worker-version-match says the compilers differ, not 'rebuild both from the same tree'", () => {
    const w = {
      bind: "10.0.0.2",
      client: { target: { name: "spark-1" } },
      workerBuild: { installDir: "/w", digest: B },
      clientBuild: { installDir: "/c", digest: D, header: "h" },
      buildInputs: { worker, client },
    } as unknown as Parameters<typeof checkVersionMatch>[1];
    expect(checkVersionMatch("spark-2", w)).toEqual([
      `The rpc worker on spark-2 has ggml-rpc-server bbbbbbbbbbbb (/w), the client spark-1's build aaaaaaaaaaaa (/c): ${cause}: ${fix}`,
    ]);
  });

  it("builds-identical names the same cause from the same evidence", () => {
    const rpc = "bin/ggml-rpc-server";
    const found = checkBuildsIdentical([
      { ...client, commit: c, artifacts: { [rpc]: D } },
      { ...worker, commit: c, artifacts: { [rpc]: B } },
    ]);
    expect(found).toContain(
      `bin/ggml-rpc-server differs between nodes (spark-1=aaaaaaaaaaaa, spark-2=bbbbbbbbbbbb): ${cause}.`,
    );
  });

  it("the provider's own identity check (before the worker starts) says it too", () => {
    // Before the start no version is measured (""): the provider drops that first line.
    expect(
      identityMismatch({
        worker: { node: "spark-2", version: "", digest: B, installDir: "/w", build: worker },
        client: { node: "spark-1", version: "", digest: D, installDir: "/c", build: client },
      }),
    ).toEqual([
      "RPC version: worker spark-2 answers (unknown), the client spark-1's build is (unknown)",
      `ggml-rpc-server sha256: worker spark-2 runs ${B} (/w), the client spark-1's build has ${D} (/c): ${cause}: ${fix}`,
    ]);
  });
});
