// Issue 33 item 8 end to end: two stacks of one project serve on the same node and port. The
// real pulumi CLI runs test/e2e/two-stacks/ (the Nodes stage and one Router on spark-1, in front
// of a stand-in upstream) as stack A and stack B, both on router port 8090, against a simulated
// pair. Unit names carry only the port, so before the fix B's `up` stopped A's router and wrote
// its own config over A's. Now:
//   - B's `up` fails naming A (and the fix), and A's router keeps running, as A started it
//     (same InvocationID, A's config byte for byte, the unit's Description naming A);
//   - A's refresh and preview stay quiet; B's destroy leaves A's router;
//   - the upgrade: A's state rewritten as the main before owners wrote it (no `owner`, the unit
//     programs' earlier sha256s) and the unit's record cleared, as an older sparkform left them:
//     A's next `up` is an update [diff: ~owner,programs], the router is not restarted, and its
//     Description names A again;
//   - once A is destroyed, B's `up` takes the port.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { simDown, simUp } from "../../sim/index";
import { renderStackConfig } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { PROGRAM_UPGRADES } from "../../components/unit/programs";
import { changedResourceLines, type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { asUser } from "../support/sim-node";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { readState } from "../../stack-state";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-two-stacks-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

const projectDir = path.join(__dirname, "two-stacks");
const PROJECT = "sparkform-two-stacks";
const A = `two-a-${process.pid}`;
const B = `two-b-${process.pid}`;
const ownerOf = (stack: string) => `${PROJECT}/${stack}`;
const PORT = 8090;
const UNIT = `sparkform-router-${PORT}`;
const CONFIG = `/home/spark/.cache/sparkform/router/router-${PORT}.json`;
/** The stand-in upstream on spark-1: python's http.server, whose /health is a file. */
const UPSTREAM_PORT = 18080;
const UPSTREAM_UNIT = "two-stacks-upstream";
const STEP_MS = 20 * 60_000;

let cluster: SimCluster;
let agent: TestAgent | undefined;
let cli: PulumiCli;

function writeStackConfig(stack: string): void {
  const settings = [
    `  twostacks:routerPort: "${PORT}"`,
    `  twostacks:upstream: "http://127.0.0.1:${UPSTREAM_PORT}"`,
  ];
  writeFileSync(
    path.join(projectDir, `Pulumi.${stack}.yaml`),
    `${[renderStackConfig(cluster).trimEnd(), ...settings].join("\n")}\n`,
  );
}

/** The router unit on spark-1 as systemd has it. */
async function routerUnit(): Promise<{ state: string; invocation: string; description: string }> {
  const show = (p: string) =>
    asUser("spark-1", `systemctl --user show -p ${p} --value ${UNIT}.service`);
  return {
    state: await show("ActiveState"),
    invocation: await show("InvocationID"),
    description: await show("Description"),
  };
}
const configDigest = () => asUser("spark-1", `sha256sum ${CONFIG} | cut -d' ' -f1`);

/** Stack A's state as the main before owners wrote it: no `owner`, the earlier unit programs. */
async function rewriteAsBeforeOwners(stack: string): Promise<void> {
  const file = path.join(work, `${stack}.json`);
  const out = await cli.run(["stack", "export", "-s", stack]);
  // Edited in place and imported back: the document as read, not the reader's view of it.
  const state = readState(out.output, stack).document;
  const resources = state.deployment.resources as {
    urn: string;
    inputs?: Record<string, unknown>;
    outputs?: Record<string, unknown>;
  }[];
  const router = resources.find((r) => r.urn.endsWith("::two-router"));
  if (!router) throw new Error(`no router in ${stack}'s state`);
  for (const props of [router.inputs, router.outputs]) {
    if (!props) continue;
    delete props.owner;
    const programs = props.programs as Record<string, { name: string; sha256: string }>;
    for (const ref of Object.values(programs)) {
      const u = PROGRAM_UPGRADES[ref.name];
      if (u?.from[0]) ref.sha256 = u.from[0];
    }
  }
  writeFileSync(file, JSON.stringify(state));
  await cli.run(["stack", "import", "-s", stack, "--file", file]);
}

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("two stacks on one node and port (real pulumi CLI, simulated pair)", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    // The upstream: /health is a file, so GET /health answers 200 (what the router waits for).
    await asUser(
      "spark-1",
      `mkdir -p ~/two-stacks-upstream && echo ok > ~/two-stacks-upstream/health && ` +
        `systemd-run --user --unit=${UPSTREAM_UNIT} python3 -m http.server ${UPSTREAM_PORT} ` +
        `--bind 127.0.0.1 --directory /home/spark/two-stacks-upstream`,
    );
    agent = await startSshAgent(work, cluster.sshKeyPath);
    mkdirSync(path.join(work, "backend"));
    cli = pulumiCli(
      projectDir,
      {
        PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}`,
        SSH_AUTH_SOCK: agent.socket,
      },
      { skipPreviewWhenExpectedToSucceed: true },
    );
    for (const s of [A, B]) {
      await cli.run(["stack", "init", s, "--secrets-provider", "passphrase"]);
      writeStackConfig(s);
    }
  }, STEP_MS);

  afterAll(async () => {
    if (cli)
      for (const s of [B, A]) {
        await cli.run(["destroy", "--yes", "-s", s]).catch(() => undefined);
        await cli.run(["stack", "rm", "--yes", "--force", "-s", s]).catch(() => undefined);
        rmSync(path.join(projectDir, `Pulumi.${s}.yaml`), { force: true });
      }
    agent?.stop();
    await simDown().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }, STEP_MS);

  let started: { state: string; invocation: string; description: string };
  let config: string;

  it(
    "stack A's up starts the router; its unit records A",
    async () => {
      await cli.run(["up", "--yes", "-s", A]);
      started = await routerUnit();
      config = await configDigest();
      expect(started.state).toBe("active");
      expect(started.description).toBe(`sparkform router of stack ${ownerOf(A)}`);
    },
    STEP_MS,
  );

  it(
    "stack B's up on the same port fails naming A; A's router runs on, untouched",
    async () => {
      const r = await cli.run(["up", "--yes", "-s", B], { expectFailure: true });
      expect(r.output).toContain(
        `${UNIT} on spark-1 belongs to stack ${ownerOf(A)}, not this stack (${ownerOf(B)}), so nothing was stopped or written: ` +
          `give this stack another port (pulumi config set --path sparkform:server.router.port <port>) or run \`pulumi destroy\` on stack ${ownerOf(A)} first`,
      );
      expect(await routerUnit()).toEqual(started);
      expect(await configDigest()).toBe(config);
    },
    STEP_MS,
  );

  it(
    "A's refresh and preview stay quiet",
    async () => {
      await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", A]);
      await cli.run(["preview", "--expect-no-changes", "-s", A]);
    },
    STEP_MS,
  );

  it(
    "B's destroy leaves A's router running",
    async () => {
      await cli.run(["destroy", "--yes", "-s", B]);
      expect(await routerUnit()).toEqual(started);
    },
    STEP_MS,
  );

  it(
    "the upgrade: state and unit from before owners; A's up records A on the running router, no restart",
    async () => {
      await rewriteAsBeforeOwners(A);
      // What an older sparkform's unit has: no record (systemd-run's default, the command line).
      await asUser(
        "spark-1",
        `systemctl --user set-property --runtime ${UNIT}.service Description=caddy-run`,
      );
      const preview = await cli.run(["preview", "--diff", "-s", A]);
      const lines = changedResourceLines(preview.output);
      expect(lines.some((l) => /two-router/.test(l) && /replace/.test(l))).toBe(false);
      expect(preview.output).toMatch(/two-router/);
      const up = await cli.run(["up", "--yes", "--skip-preview", "-s", A]);
      // The one step: an update (no replace, no delete-create).
      // Only the owner: the router's programs have no declared upgrade left (issue 35 item 1
      // restarts units once, as unit files), so this state keeps this checkout's programs.
      expect(changedResourceLines(up.output).filter((l) => /two-router/.test(l))).toEqual([
        expect.stringMatching(/ updated .*\[diff: \+owner\]/),
      ]);
      const now = await routerUnit();
      expect(now.invocation).toBe(started.invocation);
      expect(now.state).toBe("active");
      expect(now.description).toBe(`sparkform router of stack ${ownerOf(A)}`);
      await cli.run(["preview", "--expect-no-changes", "-s", A]);
    },
    STEP_MS,
  );

  it(
    "once A is destroyed, B's up takes the port",
    async () => {
      await cli.run(["destroy", "--yes", "-s", A]);
      expect((await routerUnit()).state).not.toBe("active");
      await cli.run(["up", "--yes", "-s", B]);
      expect((await routerUnit()).description).toBe(`sparkform router of stack ${ownerOf(B)}`);
    },
    STEP_MS,
  );
});
