// Issue 10 on a simulated pair, through the providers themselves (no pulumi engine: the
// providers' create/delete are what the engine would call), with real ssh, rsync and agent:
//   item 1  destinations that resolve to the home, the root or through a symlink are refused
//           on the node, and the home, its .ssh and models stay intact;
//   item 4  a model revision two resources use stays until the last one is destroyed;
//   item 5  a hostile node's @result (todo: a path to the peer's key) is refused, and nothing
//           is read from the peer or written outside the relay's staging directory;
//   item 6  a two-file model copy node to node leaves a user's file named like the second
//           file alone, and no known_hosts.* file behind.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as model from "../../components/model/provider";
import type { ModelReplicaInputs, ModelReplicaOutputs } from "../../components/model/provider";
import { programRef } from "../../components/native-script";
import { localTreeDigest, TREE_DIGEST_PROGRAM } from "../../components/tree/digest";
import * as toolchain from "../../components/toolchain/provider";
import type { ToolchainInputs } from "../../components/toolchain/provider";
import * as tree from "../../components/tree/provider";
import { prepareDir } from "../../components/tree/node-dir";
import { closeAll, openNode, type SshTarget } from "../../components/transport";
import { publishRepo, startHfEndpoint, type HfEndpoint, type PublishedRepo } from "../../sim/hub";
import { simDown, simExec, simUp } from "../../sim/index";
import type { SimCluster } from "../../sim/state";
import { simTarget } from "../support/sim-node";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-hardening-e2e-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

let cluster: SimCluster;
let ep: HfEndpoint;
let pub: PublishedRepo;
let agent: TestAgent | undefined;
const target = (i: number): SshTarget => simTarget(cluster, cluster.nodes[i]!.name);
const peer = (i: number) => ({ target: target(i), fabricAddress: cluster.nodes[i]!.fabricAddress });
const node = (i: number) => cluster.nodes[i]!.name;
/** A shell command on a node as the spark user (simExec runs as root). */
async function asSpark(i: number, script: string): Promise<string> {
  const r = await simExec(node(i), ["runuser", "-u", "spark", "--", "sh", "-c", script]);
  return r.stdout.trim();
}
/** What an operator cannot lose, made on every node first. */
const PRECIOUS =
  "mkdir -p ~/.ssh ~/models/org/keep && printf weights > ~/models/org/keep/model.gguf && " +
  "mkdir -p ~/.asdf/installs && printf erl > ~/.asdf/installs/erl";
const intact = (i: number) =>
  asSpark(
    i,
    "wc -l < ~/.ssh/authorized_keys; cat ~/models/org/keep/model.gguf; echo; cat ~/.asdf/installs/erl",
  );

async function rejection(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return String(e instanceof Error ? e.message : e);
  }
  throw new Error("expected a failure");
}

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)(
  "destinations, shared revisions and node-to-node copies refuse what would harm a node (providers, real ssh/rsync)",
  () => {
    beforeAll(async () => {
      cluster = await simUp({ nodes: 2 });
      for (const i of [0, 1]) await asSpark(i, PRECIOUS);
      pub = publishRepo(path.join(work, "hub"), {
        repo: "sparkform/two-files",
        files: [
          { path: "a.gguf", bytes: Buffer.alloc(300_000, 1) },
          { path: "b.gguf", bytes: Buffer.alloc(200_000, 2) },
        ],
      });
      ep = await startHfEndpoint({ root: path.join(work, "hub"), host: cluster.controlAddress });
      agent = await startSshAgent(work, cluster.sshKeyPath);
    }, 600_000);

    afterAll(async () => {
      closeAll();
      agent?.stop();
      await ep?.close();
      await simDown().catch(() => undefined);
      rmSync(work, { recursive: true, force: true });
    }, 300_000);

    describe("item 1: the tree's rsync --delete and rm -rf, checked on the node", () => {
      const source = path.join(work, "tree");
      const inputs = (dest: string): tree.TreeSyncInputs => ({
        kind: "TreeSync",
        providerVersion: "test",
        target: target(0),
        source,
        dest,
        exclude: [],
        expectedDigest: localTreeDigest(source, []).digest,
        digestProgram: programRef(TREE_DIGEST_PROGRAM),
      });
      beforeAll(() => {
        mkdirSync(source, { recursive: true });
        writeFileSync(path.join(source, "CMakeLists.txt"), "project(x)\n");
      });

      it.each([
        ["~", "~", /is \$HOME|contains it/],
        ["a symlink to the home", "~/link-home", /symlink|is \$HOME/],
        ["a directory through a symlink to the home", "~/up/src", /through a symlink/],
        ["a directory through a symlink to /", "~/to-root/srv", /through a symlink/],
        ["the home spelled absolute", "/home/spark", /is \$HOME/],
      ])("refuses %s before rsync; the home, .ssh, models and .asdf stay", async (_n, dest, re) => {
        await asSpark(0, "ln -sfn ~ ~/link-home; ln -sfn ~ ~/up; ln -sfn / ~/to-root");
        const msg = await rejection(tree.create(inputs(dest)));
        expect(msg).toMatch(/\[spark-1\] refusing to write into/);
        expect(msg).toMatch(re);
        expect(await intact(0)).toBe("1\nweights\nerl");
        // And the destroy of such a state is refused on the node too.
        const out = { ...inputs(dest), digest: "", files: 0, bytes: 0 };
        const del = await rejection(tree.delete("x", out));
        expect(del).toMatch(/refusing to delete/);
        expect(await intact(0)).toBe("1\nweights\nerl");
      });

      it("a real destination still syncs and is removed on destroy", async () => {
        const r = await tree.create(inputs("~/src/hardening"));
        expect(r.outs!.digest).toBe(localTreeDigest(source, []).digest);
        await tree.delete(r.id, r.outs!);
        expect(await asSpark(0, "test -e ~/src/hardening && echo there || echo gone")).toBe("gone");
        expect(await intact(0)).toBe("1\nweights\nerl");
      });

      it("a model directory that is a symlink to the home is refused before anything is written", async () => {
        await asSpark(0, "mkdir -p ~/models/evil && ln -sfn ~ ~/models/evil/rev");
        const msg = await rejection(
          prepareDir(openNode(target(0)), "~/models/evil/rev", { step: "t" }),
        );
        expect(msg).toMatch(
          /refusing to write into ~\/models\/evil\/rev: it (is a symlink|is \$HOME)/,
        );
      });
    });

    describe("item 4: a toolchain copy over a directory that was there is not deleted on destroy", () => {
      const inputs = (i: number, expectedDigest?: string): ToolchainInputs => ({
        kind: "Toolchain",
        providerVersion: "test",
        target: target(i),
        path: "~/.sparktool",
        binDirs: ["installs/sparktool/1.0.0/bin"],
        probe: ["sparktool", "--version"],
        expect: "sparktool 1.0.0",
        digestProgram: programRef(TREE_DIGEST_PROGRAM),
        ...(expectedDigest ? { source: peer(0), expectedDigest } : {}),
      });

      it("made into a missing directory: removed on destroy; over an existing one: kept", async () => {
        const src = (await toolchain.create(inputs(0))).outs!;
        // spark-2 has no toolchain: the copy creates the directory, destroy removes it.
        const made = (await toolchain.create(inputs(1, src.digest))).outs!;
        expect([made.copiedBy, made.created]).toEqual(["relay", true]);
        await toolchain.delete("x", made);
        expect(await asSpark(1, "test -e ~/.sparktool && echo there || echo gone")).toBe("gone");
        // A directory of the user's at that path: the copy replaces its content (the resource's
        // job), but destroy does not delete the directory sparkform did not create.
        await asSpark(1, "mkdir -p ~/.sparktool && printf old > ~/.sparktool/user-file");
        const over = (await toolchain.create(inputs(1, src.digest))).outs!;
        expect(over.created).toBe(false);
        await toolchain.delete("x", over);
        expect(await asSpark(1, "test -d ~/.sparktool/installs && echo kept || echo gone")).toBe(
          "kept",
        );
        // State from before references: kept too.
        await toolchain.delete("x", { ...over, refToken: undefined });
        expect(await asSpark(1, "test -d ~/.sparktool && echo kept || echo gone")).toBe("kept");
        // The source's own toolchain is never touched.
        await toolchain.delete("x", src);
        expect(await asSpark(0, "test -d ~/.sparktool/installs && echo kept || echo gone")).toBe(
          "kept",
        );
      });
    });

    describe("items 4, 5, 6: the model copied node to node", () => {
      const dir = () => `~/models/${pub.repo}/${pub.commit}`;
      const inputs = (i: number, source?: number): ModelReplicaInputs => ({
        kind: "ModelReplica",
        providerVersion: "test",
        target: target(i),
        repo: pub.repo,
        commit: pub.commit,
        modelsDir: "~/models",
        dir: dir(),
        files: pub.files.map((f) => ({
          path: f.path,
          size: f.size,
          sha256: f.sha256,
          url: `${ep.url}/${pub.repo}/resolve/${pub.commit}/${f.path}`,
        })),
        verify: "fast",
        retries: 0,
        scriptDigest: model.fetchScriptDigest(),
        reserveBytes: 0,
        ...(source !== undefined ? { source: peer(source) } : {}),
      });
      let onTwo: ModelReplicaOutputs;

      beforeAll(async () => {
        expect((await model.create(inputs(0))).outs!.fetchedBy).toBe("hub");
      }, 300_000);

      it("item 6: two files over the fabric; the user's ~/b.gguf survives, no known_hosts.* stays", async () => {
        await asSpark(1, "printf mine > ~/b.gguf");
        const saved = process.env.SSH_AUTH_SOCK;
        process.env.SSH_AUTH_SOCK = agent!.socket;
        try {
          onTwo = (await model.create(inputs(1, 0))).outs!;
          expect(onTwo.fetchedBy).toBe("fabric");
          expect([...onTwo.created].sort()).toEqual(["a.gguf", "b.gguf"]);
        } finally {
          if (saved === undefined) delete process.env.SSH_AUTH_SOCK;
          else process.env.SSH_AUTH_SOCK = saved;
        }
        expect(await asSpark(1, "cat ~/b.gguf")).toBe("mine");
        expect(await asSpark(1, "ls -A ~/.cache/sparkform | grep -c '^known_hosts' || true")).toBe(
          "0",
        );
        expect(await asSpark(0, "ls -A ~/.cache/sparkform | grep -c '^known_hosts' || true")).toBe(
          "0",
        );
      });

      it("item 4: a revision two resources use stays until the last is destroyed", async () => {
        // Another stack on spark-2 with the same revision: its own reference, files present.
        const other = (await model.create(inputs(1, 0))).outs!;
        expect(other.fetchedBy).toBe("present");
        expect(other.refToken).not.toBe(onTwo.refToken);
        const files = `${dir()}/a.gguf ${dir()}/b.gguf`;
        // State written before references (no token): kept.
        await model.delete("x", { ...onTwo, refToken: undefined });
        expect(await asSpark(1, `ls ${files} | wc -l`)).toBe("2");
        // The first resource goes: the other still references the revision, so it stays.
        await model.delete("x", onTwo);
        expect(await asSpark(1, `ls ${files} | wc -l`)).toBe("2");
        // The last one goes: sparkform made the directory, so the files go with it.
        await model.delete("x", other);
        expect(await asSpark(1, `ls -A ${dir()} 2>/dev/null | wc -l`)).toBe("0");
        expect(await intact(1)).toBe("1\nweights\nerl");
      });

      it("item 5: a hostile @result naming the peer's key is refused; nothing read or written", async () => {
        const staging = () => readdirSync(tmpdir()).filter((f) => f.startsWith("sparkform-model-"));
        const before = staging();
        // spark-2 answers `prepare` with a path to the peer's private key.
        await simExec(node(1), [
          "sh",
          "-c",
          [
            "cat > /usr/local/bin/python3 <<'EOF'",
            "#!/bin/sh",
            'if [ "$2" = prepare ]; then cat >/dev/null; echo \'@result {"todo":["../../../../.ssh/id_ed25519"],"need":0,"free":1}\'; exit 0; fi',
            'exec /usr/bin/python3 "$@"',
            "EOF",
            "chmod 755 /usr/local/bin/python3",
          ].join("\n"),
        ]);
        await asSpark(1, `rm -rf ${dir()}`);
        await asSpark(0, "printf secret > ~/.ssh/id_ed25519 && chmod 600 ~/.ssh/id_ed25519");
        try {
          const msg = await rejection(model.create(inputs(1, 0)));
          expect(msg).toContain("names file(s) the resource did not ask for");
          expect(msg).toContain('"../../../../.ssh/id_ed25519"');
        } finally {
          await simExec(node(1), ["rm", "-f", "/usr/local/bin/python3"]);
        }
        expect(existsSync("/.ssh/id_ed25519")).toBe(false);
        expect(staging()).toEqual(before);
        expect(await asSpark(1, `ls -A ${dir()} 2>/dev/null | wc -l`)).toBe("0");
        expect(await asSpark(1, "cat ~/.ssh/id_ed25519 2>/dev/null || echo none")).toBe("none");
      });
    });
  },
);
