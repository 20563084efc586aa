// The acceptance suite (issue 15), shaped like a Terraform/Pulumi provider acceptance test: a
// list of steps, each a real `pulumi` command on the local stack's config (rendered as
// sim/stack.ts renders stacks/Pulumi.local.yaml, under this test's own state dir, backend and
// stack name) and the plan it must produce, read from the engine's event stream
// (`--event-log`): which resource gets which operation. Then the fault scenarios on the same
// simulated pair (faults.ts), then `destroy`, after which every node must be as it was before
// the first `up`: no sparkform unit, no listener but sshd, no file but what the stack keeps.
//
// One sim, one llama.cpp build (plus one for the build-flag step); spark-1's compiler cache is
// seeded from SPARKFORM_E2E_NODE_CCACHE when set (CI sets it) and saved back after the builds.
import { appendFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localTreeDigest } from "../../components/tree/digest";
import { publishTestModel } from "../../sim/hub";
import { LOCAL_MODEL } from "../../sim/stack";
import { changedSteps, opsByResource } from "../support/event-log";
import { fileListing, keyedCurl, listeningPorts, sparkformUnits } from "../support/sim-node";
import { faultScenarios } from "./faults";
import {
  type Acceptance,
  KEPT,
  NODES,
  openAcceptance,
  UNIT,
  GUARD,
  WORKER_PORT,
} from "../../sim/world/acceptance";
import { isRoot, requireOrSkip } from "../support/requires";

const STEP_MS = 15 * 60_000;
/** A cold llama.cpp build on a simulated node sharing 2 busy cores can take well over 10 min. */
const COLD_BUILD_MS = 45 * 60_000;

/** What `find` may see change on a node without sparkform doing it (the OS's own state). */
const NOT_OURS = [
  /^\/home\/spark\/\.cache\/sparkform\/ccache(\/|$)/, // KEPT, compared separately
  /^\/(var\/)?tmp\/systemd-private-/, // a booted node's services' private temp dirs
];

let acc: Acceptance;
const baseline: Record<string, string[]> = {};
const t0 = Date.now();
const log = (s: string) =>
  process.stderr.write(`[acceptance +${((Date.now() - t0) / 1000).toFixed(0)}s] ${s}\n`);

/** A client's chat request to the served model, from spark-1 (the server is on its loopback). */
const chatOnSpark1 = () =>
  acc.onNode(
    "spark-1",
    `${keyedCurl(8080)} -sS --max-time 120 -H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"hello"}],"max_tokens":8}' http://127.0.0.1:8080/v1/chat/completions`,
  );

/** Every path under the roots sparkform may write to (the user's home, the temp dirs). */
const listing = (node: string) =>
  fileListing(node, ["/home/spark", "/tmp", "/var/tmp", "/dev/shm"], NOT_OURS);

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("acceptance: the local stack on a simulated pair", () => {
  beforeAll(async () => {
    acc = await openAcceptance();
    for (const n of NODES) {
      baseline[n] = await listing(n);
      expect(await sparkformUnits(n)).toEqual([]);
    }
    log("sim up, baseline taken");
  }, STEP_MS);

  afterAll(async () => {
    await acc?.close();
    log("closed");
  }, STEP_MS);

  it(
    "up from scratch creates every resource, and only creates",
    async () => {
      const r = await acc.up({ policies: true, saveCache: true });
      const ops = opsByResource(r.events, acc.stack);
      log(`up: ${JSON.stringify(ops)}`);
      const expected: Record<string, string> = {};
      for (const n of NODES) {
        for (const k of ["SparkNode node", "Toolchain toolchain", "TreeSync tree"]) {
          const [kind, stage] = k.split(" ");
          expected[`${kind} ${stage}-${n}`] = "create";
        }
        expected[`NativeBuild build-${n}`] = "create";
        expected[`ModelReplica model-${n}`] = "create";
      }
      expected["FabricLink fabric-spark-1-spark-2-rail0"] = "create";
      expected["FabricLink fabric-spark-1-spark-2-rail1"] = "create";
      expected["RpcWorker worker-spark-2"] = "create";
      expected["ServingDrain serving-drain"] = "create";
      expected["LlamaServer serving-server"] = "create";
      expected["Router serving-router"] = "create";
      expected["ServerApiKey serving-api-key"] = "create";
      expect(ops).toEqual(expected);
      // On the nodes: llama-server and its RSS guard on spark-1 (the client); the worker and its
      // guard on spark-2, listening on the worker port.
      expect(await sparkformUnits("spark-1")).toEqual([
        "sparkform-llama-guard-8080.service",
        "sparkform-llama-server-8080.service",
        "sparkform-router-8090.service",
      ]);
      expect(await sparkformUnits("spark-2")).toEqual([`${GUARD}.service`, `${UNIT}.service`]);
      expect(await listeningPorts("spark-2")).toContain(WORKER_PORT);
      const out = await acc.outputs();
      const tree = out.tree as {
        expected: { digest: string };
        nodes: Record<string, { digest: string }>;
      };
      expect(tree.expected.digest).toBe(localTreeDigest(acc.treeDir, acc.treeExclude).digest);
      for (const n of NODES) expect(tree.nodes[n]?.digest).toBe(tree.expected.digest);
      const model = out.model as { nodes: Record<string, { files: { sha256: string }[] }> };
      for (const n of NODES) expect(model.nodes[n]?.files[0]?.sha256).toBe(LOCAL_MODEL.sha256);
    },
    COLD_BUILD_MS,
  );

  it(
    "stack export / import round-trips: the state is the same, and the stack is still converged",
    async () => {
      const before = await acc.exportState();
      const file = path.join(acc.work, "export.json");
      writeFileSync(file, JSON.stringify(before.document));
      const plainBefore = await acc.exportState(true);
      await acc.cli.run(["stack", "import", "-s", acc.stack, "--file", file]);
      const after = await acc.exportState();
      // What import legitimately changes: the manifest (time, magic, the writer's version) and
      // every secret's ciphertext (re-encrypted with a fresh nonce): the same once decrypted.
      const strip = ({ document: d }: typeof before) => ({
        ...d,
        deployment: { ...d.deployment, manifest: undefined },
      });
      expect(strip(await acc.exportState(true))).toEqual(strip(plainBefore));
      const ciphertexts = (d: typeof before) =>
        JSON.stringify(d.document).match(/"ciphertext"/g)?.length ?? 0;
      expect(ciphertexts(after)).toBe(ciphertexts(before));
      expect(ciphertexts(after)).toBeGreaterThan(0);
      expect(after.resources.length).toBeGreaterThan(15);
    },
    STEP_MS,
  );

  it(
    "up --expect-no-changes (with the policy pack) and refresh --expect-no-changes pass, with client traffic between",
    async () => {
      expect(await chatOnSpark1()).toMatch(/"content"/);
      const r = await acc.up({ policies: true, extra: ["--expect-no-changes"] });
      expect(changedSteps(r.events)).toEqual([]);
      expect(await chatOnSpark1()).toMatch(/"content"/);
      await acc.cli.run(["refresh", "--yes", "--expect-no-changes", "-s", acc.stack]);
      expect(await chatOnSpark1()).toMatch(/"content"/);
      await acc.cli.run([
        "refresh",
        "--yes",
        "--skip-preview",
        "--expect-no-changes",
        "-s",
        acc.stack,
      ]);
    },
    STEP_MS,
  );

  describe("edit steps: each edit's diff, and nothing else", () => {
    it(
      "a source file in the tree (one the targets do not compile): TreeSync + NativeBuild update on both nodes",
      async () => {
        appendFileSync(
          path.join(acc.treeDir, "examples", "simple", "simple.cpp"),
          "// edited by the acceptance suite\n",
        );
        const r = await acc.up({});
        // The artifacts come out the same (no target compiles the file), so the worker keeps
        // running; the drain still stops the server for the build change and it starts again.
        expect(opsByResource(r.events, acc.stack)).toEqual({
          "TreeSync tree-spark-1": "update",
          "TreeSync tree-spark-2": "update",
          "NativeBuild build-spark-1": "update",
          "NativeBuild build-spark-2": "update",
          "ServingDrain serving-drain": "update",
          "LlamaServer serving-server": "update",
        });
        const digest = localTreeDigest(acc.treeDir, acc.treeExclude).digest;
        const tree = (await acc.outputs()).tree as { nodes: Record<string, { digest: string }> };
        for (const n of NODES) expect(tree.nodes[n]?.digest).toBe(digest);
      },
      STEP_MS,
    );

    it(
      "a build flag (-march haswell), as a plan: a new build on both nodes, the worker after it",
      async () => {
        // Plan only (terraform-plugin-testing's PlanOnly step): applying it is a second cold
        // llama.cpp build (a new build directory: ~15 min on a loaded 2-core machine), more than
        // CI's cold budget has room for. The applied build-setting step is `jobs`, below.
        acc.writeConfig({ flags: { LLAMA_CPU_X86_MARCH: "haswell" } });
        try {
          const p = await acc.preview(["--expect-no-changes"], { expectFailure: true });
          const steps = changedSteps(p.events);
          log(`flag plan: ${JSON.stringify(steps)}`);
          expect(opsByResource(p.events, acc.stack)).toEqual({
            "NativeBuild build-spark-1": "update",
            "NativeBuild build-spark-2": "update",
            "ServingDrain serving-drain": "update",
            "RpcWorker worker-spark-2": "update",
            "LlamaServer serving-server": "update",
          });
          for (const s of steps.filter((x) => x.kind === "NativeBuild")) {
            expect(s.diffs).toContain("flags");
          }
        } finally {
          acc.writeConfig({ flags: undefined });
        }
        expect(changedSteps((await acc.preview(["--expect-no-changes"])).events)).toEqual([]);
      },
      STEP_MS,
    );

    it(
      "a build setting (jobs), applied: NativeBuild update on both nodes in the same build directory",
      async () => {
        const before = (await acc.outputs()).build as Record<
          string,
          { buildKey: string; artifacts: Record<string, string> }
        >;
        acc.writeConfig({ jobs: 2 });
        const r = await acc.up({});
        expect(opsByResource(r.events, acc.stack)).toEqual({
          "NativeBuild build-spark-1": "update",
          "NativeBuild build-spark-2": "update",
        });
        const after = (await acc.outputs()).build as typeof before;
        for (const n of NODES) {
          expect(after[n]?.buildKey).toBe(before[n]?.buildKey);
          expect(after[n]?.artifacts).toEqual(before[n]?.artifacts);
        }
      },
      STEP_MS,
    );

    it(
      "the model revision: both replicas replaced by the new commit, the old one removed",
      async () => {
        const moved = publishTestModel(acc.hubRoot, {
          files: [
            { path: LOCAL_MODEL.file, source: path.join(acc.pub.dir, LOCAL_MODEL.file) },
            { path: "README.md", bytes: Buffer.from("a new revision, the same weights\n") },
          ],
        });
        expect(moved.commit).not.toBe(LOCAL_MODEL.commit);
        acc.writeConfig({ revision: moved.commit });
        const r = await acc.up({});
        expect(opsByResource(r.events, acc.stack)).toEqual({
          "ModelReplica model-spark-1": "replace",
          "ModelReplica model-spark-2": "replace",
          // The worker re-warms its tensor cache beside the running server process; the server
          // loads the new revision's path.
          "RpcWorker worker-spark-2": "update",
          "LlamaServer serving-server": "update",
        });
        for (const n of NODES) {
          const dirs = (await acc.onNode(n, `ls -A /home/spark/models/${LOCAL_MODEL.repo}/`)).split(
            "\n",
          );
          expect(dirs).toEqual([moved.commit]);
        }
      },
      STEP_MS,
    );

    it(
      "a worker setting (threads): the RpcWorker restarted, and the server after it",
      async () => {
        const pid = await acc.onNode("spark-2", `systemctl --user show -p MainPID --value ${UNIT}`);
        acc.writeConfig({ threads: 2 });
        const r = await acc.up({});
        // The server's connections to the old worker are gone: it stops before the worker
        // restarts and starts after it (a new worker invocation is a server update).
        expect(opsByResource(r.events, acc.stack)).toEqual({
          "RpcWorker worker-spark-2": "update",
          "LlamaServer serving-server": "update",
        });
        expect(await chatOnSpark1()).toMatch(/"content"/);
        const now = await acc.onNode("spark-2", `systemctl --user show -p MainPID --value ${UNIT}`);
        expect(now).not.toBe(pid);
        const cmdline = await acc.onNode("spark-2", `tr '\\0' ' ' < /proc/${now}/cmdline`);
        expect(cmdline).toMatch(/(^| )-t 2( |$)|--threads 2( |$)/);
        await acc.cli.run(["refresh", "--yes", "--expect-no-changes", "-s", acc.stack]);
      },
      STEP_MS,
    );
  });

  describe("faults", () => {
    faultScenarios(() => acc, log);
  });

  it(
    "destroy deletes every resource; each node is back to its baseline (but what is kept)",
    async () => {
      const r = await acc.destroy();
      const ops = Object.values(opsByResource(r.events, acc.stack));
      expect(ops.length).toBe(17); // every dynamic resource of the stack (the key: issue 33)
      expect(new Set(ops)).toEqual(new Set(["delete"]));
      for (const n of NODES) {
        expect(await sparkformUnits(n)).toEqual([]);
        expect(await listeningPorts(n)).toEqual([acc.node(n).sshPort]);
        const now = await listing(n);
        const added = now.filter((p) => !baseline[n]?.includes(p));
        const removed = (baseline[n] ?? []).filter((p) => !now.includes(p));
        log(`${n}: added ${JSON.stringify(added)} removed ${JSON.stringify(removed)}`);
        expect({
          node: n,
          added: added.filter((p) => !KEPT.some((k) => k.test(p))),
          removed,
        }).toEqual({
          node: n,
          added: [],
          removed: [],
        });
      }
      // The kept compiler cache is the only thing left that the stack made, and it is a cache.
      const cache = await acc.onNode("spark-1", "du -sb .cache/sparkform/ccache | cut -f1");
      log(`spark-1 ccache kept: ${cache} bytes`);
    },
    STEP_MS,
  );
});
