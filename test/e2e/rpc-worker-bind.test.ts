// The worker's last line of defence against a LAN bind, on a simulated node through the real
// transport: start.sh, sent as the provider and `sparkform worker` send it, refuses an address on
// the interface that carries the management ssh session (what preview cannot see: a management
// host given as a name or alias, a second address on that link), before it stops or starts
// anything. Needs no build: the bind checks come before the binary's.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCommand, workerPrograms } from "../../components/rpc-worker/commands";
import { RemoteCommandError, closeAll, openNode } from "../../components/transport";
import { simDown, simExec, simUp } from "../../sim/index";
import type { SimCluster } from "../../sim/state";
import { simTarget, sparkformUnits } from "../support/sim-node";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-rpc-bind-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";
const PORT = 50052;
/** A second address on spark-2's management link: no config names it, the node still refuses it. */
const ALIAS = "10.255.255.2";

let cluster: SimCluster;

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("start.sh on a simulated node refuses the management interface", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    await simExec("spark-2", ["ip", "addr", "add", `${ALIAS}/32`, "dev", "mgmt0"]);
  }, 900_000);
  afterAll(async () => {
    closeAll();
    if (cluster) await simDown();
    rmSync(work, { recursive: true, force: true });
  }, 900_000);

  /** start.sh on spark-2 over its pinned ssh session: the exit code and the output's tail. */
  async function start(bind: string): Promise<{ exitCode?: number; output: string }> {
    const target = simTarget(cluster, "spark-2");
    try {
      await openNode(target).run(
        startCommand({
          binary: "no/such/ggml-rpc-server",
          bind,
          port: PORT,
          threads: 0,
          devices: [],
          cache: false,
          debug: false,
          clientBuild: { digest: "0".repeat(64) },
          rssLimitPercent: 0,
          rssIntervalSeconds: 2,
          programs: workerPrograms(),
        }),
        { step: `start.sh -H ${bind}`, timeoutMs: 120_000 },
      );
      return { output: "" };
    } catch (err) {
      if (!(err instanceof RemoteCommandError)) throw err;
      return { exitCode: err.exitCode, output: err.outputTail };
    }
  }

  it("the management address and a second address on its link are refused (exit 9), nothing started", async () => {
    const mgmt = cluster.nodes.find((x) => x.name === "spark-2")?.mgmtAddress ?? "";
    for (const bind of [mgmt, ALIAS]) {
      const r = await start(bind);
      expect(r.exitCode).toBe(9);
      expect(r.output).toContain(
        // The transport's env -i drops SSH_CONNECTION: start.sh finds the session by logind.
        `${bind} is on mgmt0, the interface that carries this management session (the control ` +
          `node's session comes from ${cluster.controlAddress}, reached through it): ` +
          "ggml-rpc-server has no authentication",
      );
    }
    expect(await sparkformUnits("spark-2")).toEqual([]);
  });

  it("the fabric address passes the bind checks and stops at the next one (no binary here)", async () => {
    const fabric = cluster.nodes.find((x) => x.name === "spark-2")?.fabricAddress ?? "";
    const r = await start(fabric);
    expect(r.exitCode).toBe(3);
    expect(r.output).toContain("/home/spark/no/such/ggml-rpc-server is not an executable file");
    expect(await sparkformUnits("spark-2")).toEqual([]);
  });
});
