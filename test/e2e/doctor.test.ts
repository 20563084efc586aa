// `sparkform doctor` on a simulated pair (nodes and fabric only: nothing is deployed, so it is
// cheap): a healthy config passes; doctor changes nothing on a node (its files and user units
// are the same before and after); a changed host key is refused with the fix; a stopped node
// is named within seconds, not after ssh's default timeout.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLocalHub } from "../../cli/commands/local";
import { doctor, exitCode, renderFindings, type Finding } from "../../cli/doctor";
import { CONNECT_TIMEOUT_S, fingerprint } from "../../cli/doctor/nodes";
import { simDown, simExec, simStop, simUp } from "../../sim/index";
import type { SimCluster } from "../../sim/state";
import { pulumiCli, type PulumiCli } from "../../sim/world/pulumi-cli";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-doctor-e2e-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";
const projectDir = path.join(__dirname, "doctor");
const stack = `doctor-${path.basename(work).slice(-6)}`;

let cluster: SimCluster;
let pulumi: PulumiCli;
let agent: TestAgent | undefined;

async function run(): Promise<{ findings: Finding[]; ms: number }> {
  const t0 = Date.now();
  const findings = await doctor({ stack, projectDir });
  const ms = Date.now() - t0;
  console.log(renderFindings(findings, ms).join("\n"));
  return { findings, ms };
}

/**
 * What doctor could change on a node: every file under the login user's home, /tmp and
 * /var/tmp with its size and mtime (a file made and removed again still changes its
 * directory's mtime), and the user's systemd units. Read as root inside the node (not over
 * ssh, which is what is being judged). /run/user is left out: logind makes it per session.
 */
async function snapshot(node: string): Promise<string> {
  const files = await simExec(node, [
    "sh",
    "-c",
    "find /home/spark /tmp /var/tmp -xdev -printf '%p %s %T@\\n' | sort",
  ]);
  const units = await simExec(node, [
    "runuser",
    "-u",
    "spark",
    "--",
    "env",
    "XDG_RUNTIME_DIR=/run/user/1000",
    "systemctl",
    "--user",
    "list-units",
    "--all",
    "--no-legend",
    "--plain",
  ]);
  return `${files.stdout}\n--- units\n${units.stdout}`;
}

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("sparkform doctor on a simulated pair", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    // The sim's stack config (nodes, ssh, both fabric rails) as this stack's configuration.
    copyFileSync(cluster.stackConfigPath, path.join(projectDir, `Pulumi.${stack}.yaml`));
    // The config's model endpoint: doctor resolves the model's size there for the disk check.
    await startLocalHub(cluster);
    pulumi = pulumiCli(projectDir);
    await pulumi.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    // The template's tree source (.sparkform/llama.cpp) exists only after `npm run local` has
    // run in this checkout: doctor would rightly fail the config in a clean clone (CI).
    const tree = path.join(work, "llama.cpp");
    mkdirSync(tree);
    await pulumi.run(["config", "set", "--path", "sparkform:tree.source", tree, "-s", stack]);
    // Not a git checkout either: the commit the bundle holds (sim/llama/bundle.ts), as a real
    // stack names it.
    await pulumi.run([
      "config",
      "set",
      "--path",
      "sparkform:build.commit",
      "80fb11ac73e66d89eae2c6a91d8a77428fa733ed",
      "-s",
      stack,
    ]);
    // As `npm run local` runs it: node-to-node copies ride an agent.
    agent = await startSshAgent(work, cluster.sshKeyPath);
    process.env.SSH_AUTH_SOCK = agent.socket;
  }, 900_000);

  afterAll(async () => {
    agent?.stop();
    await pulumi?.run(["stack", "rm", stack, "--yes", "--force"]).catch(() => undefined);
    rmSync(path.join(projectDir, `Pulumi.${stack}.yaml`), { force: true });
    await simDown().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }, 300_000);

  it("passes a healthy pair, every check, and changes nothing on the nodes", async () => {
    const before = await Promise.all(cluster.nodes.map((n) => snapshot(n.name)));
    const { findings } = await run();
    const after = await Promise.all(cluster.nodes.map((n) => snapshot(n.name)));

    expect(findings.filter((f) => f.status !== "pass")).toEqual([]);
    expect(exitCode(findings)).toBe(0);
    // The model resolved at the local hub before anything was deployed, and measured against
    // each node's free space.
    expect(findings.find((f) => f.check === "model")?.what).toMatch(
      /^sparkform\/tiny-llama@1e8e0ae01376 resolved at http:\/\/\S+: 1 file\(s\), 2\.4 MiB$/,
    );
    for (const n of cluster.nodes) {
      expect(findings.find((f) => f.where === n.name && f.check === "disk")?.what).toMatch(
        /^model 2\.4 MiB \(2\.4 MiB still to fetch\), [\d.]+ GiB free on \/home\/spark$/,
      );
    }
    expect(findings.find((f) => f.where === "spark-2" && f.check === "port")?.what).toBe(
      "rpc worker port 50052 is free",
    );
    for (const n of cluster.nodes) {
      const reach = findings.find((f) => f.where === n.name && f.check === "reach");
      expect(reach?.what).toContain(fingerprint(n.hostKey));
      expect(findings.some((f) => f.where === n.name && f.check === "clock")).toBe(true);
      expect(findings.some((f) => f.where === n.name && f.check === "linger")).toBe(true);
    }
    // Both rails judged from the nodes' live fact sheets (and the fixture RDMA facts).
    expect(findings.filter((f) => f.check === "fabric").map((f) => f.where)).toEqual([
      "spark-1↔spark-2 rail 0",
      "spark-1↔spark-2 rail 1",
    ]);
    for (const check of ["node", "pulumi", "ssh", "rsync", "python3", "ssh-agent", "config"]) {
      expect(findings.map((f) => f.check)).toContain(check);
    }
    // The proof of "read-only": the same files (size, mtime) and units on both nodes.
    expect(before[0]).toContain("/home/spark/.ssh/authorized_keys");
    expect(after).toEqual(before);
  });

  /** Pin `key` as spark-2's host key in the stack's config, as a user would. */
  const pinSpark2 = (key: string) =>
    pulumi.run(["config", "set", "-s", stack, "--path", "sparkform:nodes[1].hostKey", key]);

  it("refuses a node whose host key is not the pinned one, and prints the fix", async () => {
    const [one, two] = cluster.nodes as [SimCluster["nodes"][0], SimCluster["nodes"][0]];
    // spark-2 pinned to spark-1's key: a valid key, not spark-2's.
    await pinSpark2(one.hostKey);
    try {
      const { findings } = await run();
      const f = findings.find((x) => x.where === two.name && x.check === "host-key");
      expect(f?.status).toBe("fail");
      expect(f?.what).toContain(`pinned ${fingerprint(one.hostKey)}`);
      expect(f?.what).toContain(`presented ${fingerprint(two.hostKey)}`);
      expect(f?.what).toContain("nothing was run there");
      expect(f?.fix).toContain("cat /etc/ssh/ssh_host_ed25519_key.pub");
      expect(f?.fix).toContain("pulumi config set --path 'sparkform:nodes[1].hostKey'");
      // Nothing was judged from that node (the config's checks still ran); spark-1 is fine.
      const config = ["host-key-pinned", "rpc-bound-to-fabric", "rss-guard-on"];
      expect(
        findings
          .filter((x) => x.where === two.name && !config.includes(x.check))
          .map((x) => x.check),
      ).toEqual(["host-key"]);
      expect(findings.find((x) => x.where === one.name && x.check === "reach")?.status).toBe(
        "pass",
      );
      expect(exitCode(findings)).toBe(2);
    } finally {
      await pinSpark2(two.hostKey);
    }
  });

  it("names a stopped spark-2 within seconds", async () => {
    await simStop("spark-2");
    const { findings, ms } = await run();
    const f = findings.find((x) => x.where === "spark-2" && x.check === "reach");
    expect(f?.status).toBe("fail");
    // The connect bound applied (its own clock, not the run's: a busy machine delays the rest).
    const within = /spark@\S+:22 did not answer within (\d+\.\d) s/.exec(f?.what ?? "");
    expect(within, f?.what).not.toBeNull();
    expect(Number(within?.[1])).toBeLessThan(CONNECT_TIMEOUT_S + 2);
    expect(f?.fix).toContain("sparkform sim start spark-2");
    expect(findings.find((x) => x.where === "spark-1" && x.check === "reach")?.status).toBe("pass");
    // The fabric cannot be judged without spark-2's fact sheet: said, not guessed.
    expect(findings.filter((x) => x.check === "fabric").map((x) => x.status)).toEqual([
      "skip",
      "skip",
    ]);
    expect(exitCode(findings)).toBe(2);
    // ssh's own default would wait minutes (the kernel's SYN retries: ~2 min) for a host that
    // does not answer; the whole run is bounded well below that even on a loaded machine.
    expect(ms).toBeLessThan(30_000);
  });
});
