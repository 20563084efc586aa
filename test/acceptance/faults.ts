// Fault scenarios (issue 15), each injected into the acceptance suite's converged stack on its
// simulated pair, with the outcome asserted on the nodes, the state and the engine's events.
// Each leaves the stack converged for the next (its last step proves it).
import { existsSync, readdirSync, readFileSync, writeFileSync, appendFileSync } from "node:fs";
import * as path from "node:path";
import { expect, it } from "vitest";
import { localTreeDigest } from "../../components/tree/digest";
import { simExec, simLink, simRate, simStart, simStop } from "../../sim/index";
import { LOCAL_MODEL, renderStackConfig } from "../../sim/stack";
import { changedSteps, failedResources, opsByResource, readEvents } from "../support/event-log";
import { keyedCurl, sparkformUnits } from "../support/sim-node";
import { type Acceptance, GUARD, UNIT } from "../../sim/world/acceptance";

const STEP_MS = 15 * 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every 200 ms until it is truthy (or throws after `ms`, naming `what`). */
async function until<T>(what: string, check: () => Promise<T> | T, ms = 120_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
    await sleep(200);
  }
}

/** Whether the engine has started a non-`same` step on a resource named `…-<suffix>`. */
function started(events: string, suffix: string, op?: string): boolean {
  if (!existsSync(events)) return false;
  try {
    return changedSteps(events).some((s) => s.name.endsWith(`-${suffix}`) && (!op || s.op === op));
  } catch {
    return false; // a line being written
  }
}

/** The processes of a process group (the background pulumi and what it started). */
function groupPids(pgid: number): number[] {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) === pgid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

const modelBytes = (a: Acceptance) =>
  a.pub.files.find((f) => f.path === LOCAL_MODEL.file)?.size ?? 0;
const modelGlob = `/home/spark/models/${LOCAL_MODEL.repo}/*/${LOCAL_MODEL.file}`;

export function faultScenarios(get: () => Acceptance, log: (s: string) => void): void {
  const converged = async () => {
    const a = get();
    await a.cli.run(["preview", "--expect-no-changes", "-s", a.stack]);
  };
  const editTree = (tag: string) =>
    appendFileSync(path.join(get().treeDir, "examples", "simple", "simple.cpp"), `// ${tag}\n`);

  it(
    "a node's host key changed: refused before any command runs on that node, with the fix",
    async () => {
      const a = get();
      const key = "/etc/ssh/ssh_host_ed25519_key";
      await simExec("spark-2", [
        "sh",
        "-c",
        `cp -a ${key} /root/hk && cp -a ${key}.pub /root/hk.pub && rm -f ${key} ${key}.pub && ` +
          `ssh-keygen -q -t ed25519 -N '' -C '' -f ${key} && systemctl restart ssh`,
      ]);
      const mark = (await simExec("spark-2", ["date", "+%Y-%m-%d %H:%M:%S"])).stdout.trim();
      await sleep(1100); // journalctl --since has a resolution of a second
      const sessions = async () =>
        (
          await simExec("spark-2", ["journalctl", "--no-pager", "-o", "cat", "--since", mark])
        ).stdout
          .split("\n")
          .filter((l) => /Accepted publickey/.test(l));
      try {
        const r = await a.cli.run(["refresh", "--yes", "-s", a.stack], { expectFailure: true });
        expect(r.output).toMatch(/\[spark-2\][^\n]*host key verification failed/i);
        expect(r.output).toContain("update hostKey in the stack config");
        expect(r.output).not.toMatch(/\[spark-1\][^\n]*host key/i);
        // sshd on spark-2 authenticated no session: the client stopped at the key exchange.
        expect(await sessions()).toEqual([]);
      } finally {
        await simExec("spark-2", [
          "sh",
          "-c",
          `mv -f /root/hk ${key} && mv -f /root/hk.pub ${key}.pub && systemctl restart ssh`,
        ]);
      }
      await a.cli.run(["refresh", "--yes", "--expect-no-changes", "-s", a.stack]);
      // The journal does record sessions (so the empty list above means something).
      expect((await sessions()).length).toBeGreaterThan(0);
    },
    STEP_MS,
  );

  it(
    "two `pulumi up` at once: the second is refused by the backend's lock; the state is intact",
    async () => {
      const a = get();
      const before = await a.exportState();
      editTree("two ups at once");
      const first = a.start(["up", "--yes", "-s", a.stack]);
      const locks = path.join(a.backend, ".pulumi", "locks");
      const lockFiles = () =>
        existsSync(locks)
          ? readdirSync(locks, { recursive: true }).filter((f) => String(f).endsWith(".json"))
          : [];
      await until("the first up's lock", () => lockFiles().length > 0);
      const second = await a.cli.run(["up", "--yes", "-s", a.stack], { expectFailure: true });
      expect(second.output).toMatch(/the stack is currently locked by 1 lock\(s\)/);
      expect(second.output).toMatch(/pid \d+/);
      const r = await first.child;
      log(
        `first up: exit ${r.exitCode}${r.exitCode === 0 ? "" : `\n${String(r.all).slice(-6000)}`}`,
      );
      expect(r.exitCode).toBe(0);
      expect(lockFiles()).toEqual([]);
      const after = await a.exportState();
      const urns = (d: typeof before) => d.resources.map((x) => x.urn).sort();
      expect(urns(after)).toEqual(urns(before));
      expect(JSON.stringify(after)).not.toMatch(/pending_operations":\s*\[\s*\{/);
      const digest = localTreeDigest(a.treeDir, a.treeExclude).digest;
      const tree = (await a.outputs()).tree as { nodes: Record<string, { digest: string }> };
      expect(tree.nodes["spark-2"]?.digest).toBe(digest);
      await converged();
    },
    STEP_MS,
  );

  it(
    "a rail cut during the model fan-out: the copy resumes when the link is back, the file verified",
    async () => {
      const a = get();
      const target = await a.onNode("spark-2", `ls ${modelGlob}`);
      expect(target).toMatch(/\.gguf$/);
      await a.onNode("spark-2", `rm -f ${target}`);
      await a.cli.run([
        "refresh",
        "--yes",
        "-s",
        a.stack,
        "--target",
        await a.urn("model-spark-2"),
      ]);
      // Rail 0 (the fabric address the copy uses) slowed to 1 Mbit/s from spark-1 (its line is
      // 1 Gbit/s), so the 2.4 MiB copy takes ~20 s and the cut lands in the middle.
      await simRate("spark-1", 1, 0);
      const part = `${target}.part`;
      const size = async () =>
        Number((await a.onNode("spark-2", `stat -c %s ${part} 2>/dev/null || echo 0`)) || 0);
      let cutAt = 0;
      try {
        const run = a.start(["up", "--yes", "-s", a.stack]);
        cutAt = await until("the copy's first bytes on spark-2", async () => {
          const s = await size();
          return s > 64 * 1024 ? s : 0;
        });
        await simLink("spark-1", "spark-2", "down", 0);
        const cutSize = await size();
        await sleep(5000);
        const stillCut = await size();
        log(`rail 0 cut at ${cutAt} bytes; ${cutSize} → ${stillCut} while cut`);
        expect(stillCut).toBeLessThan(modelBytes(a));
        await simLink("spark-1", "spark-2", "up", 0);
        const r = await run.child;
        log(`up after the cut: exit ${r.exitCode}`);
        expect(r.exitCode).toBe(0);
        expect(changedSteps(run.events).map((s) => `${s.kind} ${s.op}`)).toContain(
          "ModelReplica update",
        );
      } finally {
        await simLink("spark-1", "spark-2", "up", 0).catch(() => undefined);
        await simRate("spark-1", undefined, 0);
      }
      expect(cutAt).toBeGreaterThan(0);
      expect(await a.onNode("spark-2", `sha256sum ${target} | cut -c1-64`)).toBe(
        LOCAL_MODEL.sha256,
      );
      expect(await a.onNode("spark-2", `test -e ${part} && echo left || echo none`)).toBe("none");
      const state = await a.exportState();
      const replica = state.resources.find((x) => x.urn.endsWith("-model-spark-2"));
      expect(replica?.outputs.fetchedBy).toBe("fabric");
      await converged();
    },
    STEP_MS,
  );

  it(
    "ENOSPC on a node during a download: a hard failure, nothing at the final path",
    async () => {
      const a = get();
      const small = `${a.stack}-nospace`;
      const file = path.join(path.dirname(a.stackFile), `Pulumi.${small}.yaml`);
      const dir = "/home/spark/small-models";
      // A real filesystem with room for the model when the download starts (the free-space
      // check passes); a filler takes the rest while the bytes arrive.
      await simExec("spark-1", [
        "sh",
        "-c",
        `mkdir -p ${dir} && mount -t tmpfs -o size=4m,uid=1000,gid=1000 tmpfs ${dir}`,
      ]);
      await a.cli.run(["stack", "init", small, "--secrets-provider", "passphrase"]);
      try {
        const rendered = renderStackConfig(a.cluster).trimEnd().split("\n");
        const nodesOnly = rendered.slice(0, rendered.indexOf("  sparkform:fabric:"));
        const salt = readFileSync(file, "utf8")
          .split("\n")
          .filter((l) => l.startsWith("encryptionsalt:"));
        writeFileSync(
          file,
          [
            ...salt,
            ...nodesOnly,
            "  sparkform:model:",
            `    repo: ${JSON.stringify(LOCAL_MODEL.repo)}`,
            `    revision: ${JSON.stringify(LOCAL_MODEL.commit)}`,
            `    files: [${JSON.stringify(LOCAL_MODEL.file)}]`,
            `    sha256: {${JSON.stringify(LOCAL_MODEL.file)}: ${JSON.stringify(LOCAL_MODEL.sha256)}}`,
            `    endpoint: ${JSON.stringify(a.ep.url)}`,
            '    modelsDir: "~/small-models"',
            "    nodes: [spark-1]",
            "",
          ].join("\n"),
        );
        a.ep.setFaults({ throttleBytesPerSec: 300_000, pathSuffix: ".gguf" });
        const final = `${dir}/${LOCAL_MODEL.repo}/${LOCAL_MODEL.commit}/${LOCAL_MODEL.file}`;
        a.ep.clearLog();
        const run = a.start(["up", "--yes", "-s", small]);
        await until(
          "the download's first bytes",
          async () =>
            Number(await a.onNode("spark-1", `stat -c %s ${final}.part 2>/dev/null || echo 0`)) > 0,
        );
        // The disk fills up mid-download (another writer on the node).
        await a.onNode(
          "spark-1",
          `fallocate -l $(df -B1 --output=avail ${dir} | tail -1) ${dir}/filler || true`,
        );
        const r = await run.child;
        log(`up on a full disk: exit ${r.exitCode}\n${r.all}`);
        expect(r.exitCode).not.toBe(0);
        expect(r.all).toMatch(/No space left on device/);
        expect(r.all).toMatch(/\[spark-1\]/);
        expect(r.all).not.toMatch(/resumes from there/); // a full disk is not a network blip
        const gets = a.ep
          .log()
          .filter((e) => e.method === "GET" && e.path.includes(`/resolve/${LOCAL_MODEL.commit}/`));
        expect(gets.length).toBe(1); // not retried
        expect(await a.onNode("spark-1", `test -e ${final} && echo present || echo absent`)).toBe(
          "absent",
        );
        expect(
          await a.onNode("spark-1", `ls -A ${dir}/${LOCAL_MODEL.repo}/${LOCAL_MODEL.commit}/`),
        ).toBe("");
      } finally {
        a.ep.setFaults({});
        await a.cli.run(["destroy", "--yes", "-s", small]).catch(() => undefined);
        await a.cli.run(["stack", "rm", "--yes", "--force", "-s", small]).catch(() => undefined);
        await simExec("spark-1", ["sh", "-c", `umount ${dir}; rmdir ${dir}`]);
      }
    },
    STEP_MS,
  );

  it(
    "a node stopped during `up`: its resources fail with a clear error, the other node's finish; after `sim start` the next up converges",
    async () => {
      const a = get();
      editTree("node stopped during up");
      const run = a.start(["up", "--yes", "-s", a.stack]);
      await until("the up's first step", () => started(run.events, "tree-spark-1"));
      await simStop("spark-2");
      const r = await run.child;
      try {
        log(`up with spark-2 stopped: exit ${r.exitCode}`);
        expect(r.exitCode).not.toBe(0);
        // A transient failure fails the up and deletes nothing (issue 21, item 5).
        const ops = Object.values(opsByResource(run.events, a.stack));
        expect(ops.filter((o) => o === "delete" || o === "replace")).toEqual([]);
        const failed = failedResources(run.events);
        log(`failed: ${JSON.stringify(failed)}`);
        expect(failed.length).toBeGreaterThan(0);
        for (const f of failed) expect(f).toMatch(/-spark-2$/);
        expect(String(r.all)).toMatch(
          /\[spark-2\][^\n]*(unreachable|No route to host|timed out|closed)/i,
        );
        // spark-1 finished its part: its tree and build are the edit's, on the node.
        const done = readEvents(run.events)
          .flatMap((e) => (e.resOutputsEvent ? [e.resOutputsEvent.metadata.urn] : []))
          .filter((u) => u.endsWith("-spark-1"));
        expect(done.some((u) => u.endsWith("-tree-spark-1"))).toBe(true);
        expect(done.some((u) => u.endsWith("-build-spark-1"))).toBe(true);
        // (The stack's outputs are written only by a successful up: read the resource's state.)
        const digest = localTreeDigest(a.treeDir, a.treeExclude).digest;
        const state = (await a.exportState()).resources;
        const tree1 = state.find((x) => x.urn.endsWith("-tree-spark-1"));
        expect(tree1?.outputs.digest).toBe(digest);
      } finally {
        await simStart("spark-2");
      }
      const again = await a.up({ extra: ["--refresh"] });
      expect(
        Object.values(opsByResource(again.events, a.stack)).filter(
          (o) => o === "delete" || o === "replace",
        ),
      ).toEqual([]);
      log(
        `after sim start: ${JSON.stringify(changedSteps(again.events).map((s) => `${s.kind} ${s.name} ${s.op}`))}`,
      );
      expect(await sparkformUnits("spark-2")).toEqual([`${GUARD}.service`, `${UNIT}.service`]);
      expect(await a.onNode("spark-2", "pgrep -c -x -u spark ggml-rpc-server || true")).toBe("1");
      await a.cli.run(["refresh", "--yes", "--expect-no-changes", "-s", a.stack]);
    },
    STEP_MS,
  );

  it(
    "the control node's pulumi killed mid-up (SIGKILL): the next up converges, nothing leaked on the nodes",
    async () => {
      const a = get();
      const worker = await a.urn("worker-spark-2");
      await a.cli.run([
        "destroy",
        "--yes",
        "-s",
        a.stack,
        "--target",
        worker,
        "--target-dependents",
      ]);
      expect(await sparkformUnits("spark-2")).toEqual([]);
      const run = a.start(["up", "--yes", "-s", a.stack]);
      await until("the worker's create", () => started(run.events, "worker-spark-2", "create"));
      // At once: the provider is starting the unit on spark-2 (a warm create takes seconds).
      const pgid = run.child.pid ?? 0;
      process.kill(pgid, "SIGKILL");
      await run.child.catch(() => undefined);
      // What the CLI had started (language host, program, providers) is left without it: give
      // it a minute to notice, then end what remains of that process group (ours).
      await until(
        "the killed CLI's children to exit",
        () => groupPids(pgid).length === 0,
        60_000,
      ).catch(() => {
        const left = groupPids(pgid);
        log(`still running after 60 s, killed: ${left.join(" ")}`);
        for (const p of left) process.kill(p, "SIGKILL");
      });
      const state = JSON.stringify((await a.exportState()).document);
      log(
        `pending after the kill: ${/"pending_operations":\s*(\[[^\]]*\])/.exec(state)?.[1] ?? "none"}`,
      );
      // The lock the killed CLI held stays; the next up says so and how to clear it.
      const blocked = await a.up({ expectFailure: true });
      expect(blocked.output).toMatch(/currently locked by 1 lock\(s\)[\s\S]*pulumi cancel/);
      await a.cli.run(["cancel", "--yes", "-s", a.stack]);
      await a.cli.run(["refresh", "--yes", "--clear-pending-creates", "-s", a.stack]);
      await a.up({});
      expect(await sparkformUnits("spark-2")).toEqual([`${GUARD}.service`, `${UNIT}.service`]);
      expect(await a.onNode("spark-2", "pgrep -c -x -u spark ggml-rpc-server || true")).toBe("1");
      for (const n of ["spark-1", "spark-2"]) {
        expect(await a.onNode(n, "ls -A /tmp | grep -i sparkform || true")).toBe("");
      }
      await a.cli.run(["refresh", "--yes", "--expect-no-changes", "-s", a.stack]);
    },
    STEP_MS,
  );

  // Skipped: the serving stage (h-server's LlamaServer, SERVING-CONTRACT.md) is not on this
  // branch; written against the contract's outputs (serving.server.url/unit, serving.smoke) so
  // the integrator can enable it once it is merged.
  it(
    "the worker killed during a generation: the client aborts (upstream), refresh sees the worker's crash (the server's restart is its worker's loss), up recovers and the smoke passes",
    async () => {
      const a = get();
      const serving = (await a.outputs()).serving as {
        server: { node: string; url: string; unit: string };
        smoke: { identical: boolean; tokenCount: number };
      };
      const { node, url, unit } = serving.server;
      const restarts = async (n: string, u: string) =>
        Number(await a.onNode(n, `systemctl --user show -p NRestarts --value ${u}`));
      const serverRestarts = await restarts(node, unit);
      const pid = await a.onNode("spark-2", `systemctl --user show -p MainPID --value ${UNIT}`);
      // The tiny model generates faster than a test can aim a kill: the worker is frozen first,
      // so the generation is in flight (the client waits on the worker's reply), then killed.
      await a.onNode("spark-2", `kill -STOP ${pid}`);
      const body = JSON.stringify({
        prompt: "abc",
        n_predict: 64,
        temperature: 0,
      });
      // With the server's key: a refusal (401) would also be "not 200", and prove nothing.
      const port = Number(new URL(url).port);
      const gen = simExec(
        node,
        [
          "sh",
          "-c",
          `${keyedCurl(port)} -sS -o /dev/null -w '%{http_code}' --max-time 60 ` +
            `-H 'Content-Type: application/json' -d '${body}' ${url}/completion`,
        ],
        { user: "spark" },
      ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? "" }));
      await sleep(2000);
      await a.onNode("spark-2", `kill -9 ${pid}`);
      const r = await gen;
      log(`generation under a killed worker: HTTP ${JSON.stringify(r.stdout)}`);
      // Upstream llama.cpp's RPC client aborts the whole process on a lost server (ggml-rpc.cpp:
      // RPC_STATUS_ASSERT → GGML_ABORT("Remote RPC server crashed or returned malformed
      // response")): the request dies with the connection, and systemd restarts the unit.
      expect(r.stdout).not.toBe("200");
      expect(r.stdout).not.toBe("401");
      await until("the server unit restarted", async () =>
        (await restarts(node, unit)) > serverRestarts ? true : undefined,
      );
      const journal = await a.onNode(
        node,
        `journalctl --user -u ${unit} --no-pager -o cat | grep -c 'Remote RPC server crashed' || true`,
      );
      log(`client aborts in the journal: ${journal}`);
      const refreshed = await a.cli.run(["refresh", "--yes", "-s", a.stack]);
      // The worker's crash is drift; the server's restart is not its own (issue 35 item 1: its
      // ExecStopPost recorded the stop as the worker's loss), so only the worker is updated.
      expect(refreshed.output).toMatch(/RpcWorker\s+\S+\s+updated/);
      expect(refreshed.output).not.toMatch(/LlamaServer\s+\S+\s+updated/);
      await a.up({});
      const after = (await a.outputs()).serving as typeof serving;
      expect(after.smoke.identical).toBe(true);
      expect(after.smoke.tokenCount).toBeGreaterThan(0);
      await a.cli.run(["refresh", "--yes", "--expect-no-changes", "-s", a.stack]);
    },
    STEP_MS,
  );
}
