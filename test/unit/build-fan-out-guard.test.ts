// The fan-out's `rsync --delete` into ~/.cache/sparkform/llama-build/incoming/<key> keeps the
// README's promise: a node-side check before every `--delete` (issue 22 item 10). fanOut runs
// here with its real node programs and the real copy body (copy-from-peer.sh and the rsync line
// with its flags), executed on this machine under throwaway homes instead of over ssh.
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { fanOut, type FanOutInputs, incomingRel } from "../../components/build/fan-out";
import { sparkBuildFlags } from "../../components/build/flags";
import { buildPlan } from "../../components/build/plan";
import { peerCopyCommand, type Peer, type PeerCopyPlan } from "../../components/peer-copy";
import {
  type RemoteCommand,
  type RunOptions,
  type SshTarget,
  RemoteCommandError,
} from "../../components/transport";
import { runLocally } from "../support/local-node";

const root = realpathSync(mkdtempSync(path.join(tmpdir(), "sparkform-fanout-guard-")));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const homes = new Map<string, string>();

/** A command of the transport, run here as the node runs it: $HOME is the node's home. */
function runHere(node: string, cmd: RemoteCommand, opts: RunOptions) {
  const r = runLocally(cmd, { home: homes.get(node)! });
  const exitCode = r.status ?? 1;
  if (!(opts.okExitCodes ?? [0]).includes(exitCode)) {
    const command = r.argv.join(" ");
    throw new RemoteCommandError(
      {
        node,
        step: opts.step,
        command,
        kind: "exit",
        exitCode,
        stdout: r.stdout,
        stderr: r.stderr,
      },
      [],
    );
  }
  return { stdout: r.stdout, stderr: r.stderr, exitCode };
}

vi.mock("../../components/transport", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../components/transport")>()),
  openNode: (t: SshTarget) => ({
    target: t,
    run: async (cmd: RemoteCommand, opts: RunOptions) => runHere(t.name, cmd, opts),
  }),
}));
// Over the fabric, as the node would: the preamble and the rsync body, the peer's side a path here.
vi.mock("../../components/peer-copy", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../components/peer-copy")>()),
  copyFromPeerOrRelay: async (node: { target: SshTarget }, peer: Peer, plan: PeerCopyPlan) => {
    const cmd = peerCopyCommand(peer, plan.fabric);
    const args = [...(cmd.args ?? [])];
    args[4] = path.join(homes.get(peer.target.name)!, plan.fabric.source);
    runHere(node.target.name, { ...cmd, args }, { step: plan.fabric.step });
    return "fabric";
  },
}));
vi.mock("../../components/providers/progress", () => ({
  progress: async () => undefined,
  since: () => "0 s",
}));

const target = (name: string): SshTarget =>
  ({ name, host: name, port: 22, user: "spark", hostKey: "ssh-ed25519 AAAA" }) as SshTarget;
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** The source node's installed build, and the inputs a receiving node's fanOut gets. */
function setup() {
  const n = homes.size;
  const src = `src-${n}`;
  const dst = `dst-${n}`;
  homes.set(src, path.join(root, src));
  homes.set(dst, path.join(root, dst));
  mkdirSync(homes.get(dst)!);
  const flags = sparkBuildFlags("1".repeat(40));
  const base = {
    tree: "~/src/llama.cpp",
    flags,
    targets: ["ggml-rpc-server"],
    artifacts: ["bin/ggml-rpc-server"],
  };
  const key = buildPlan({ home: homes.get(src)!, ...base }).key;
  const installDir = path.join(homes.get(src)!, ".cache/sparkform/llama-build/out", key);
  mkdirSync(path.join(installDir, "bin"), { recursive: true });
  writeFileSync(path.join(installDir, "bin/ggml-rpc-server"), "rpc-server");
  const inputs: FanOutInputs = {
    target: target(dst),
    tree: base.tree,
    flags,
    targets: base.targets,
    artifactPaths: base.artifacts,
    jobs: 0,
    fanOutFrom: {
      peer: { target: target(src) },
      buildKey: key,
      installDir,
      installed: { "bin/ggml-rpc-server": sha("rpc-server") },
      checks: [],
      instructions: {},
      cpuLibrary: { path: "", sha256: "" },
      compiler: "cc",
      compilerDigests: { cxx: "", nvcc: "", nvccVersion: "" },
      treeDigest: "",
    },
  };
  return { home: homes.get(dst)!, key, inputs };
}

describe("fanOut: the node-side check before the copy's --delete (issue 22 item 10)", () => {
  it("receives and installs the source's build (the check lets a plain directory through)", async () => {
    const { home, key, inputs } = setup();
    const r = await fanOut(inputs);
    expect(r.installed).toEqual({ "bin/ggml-rpc-server": sha("rpc-server") });
    const out = path.join(home, ".cache/sparkform/llama-build/out");
    expect(readlinkSync(path.join(out, key))).toMatch(new RegExp(`^\\.store/${key}-`));
    expect(readFileSync(path.join(out, key, "bin/ggml-rpc-server"), "utf8")).toBe("rpc-server");
    expect(existsSync(path.join(home, incomingRel(key)))).toBe(false);
  });

  it("an incoming directory that is a symlink: refused before the copy, the link's target keeps its files", async () => {
    const { home, key, inputs } = setup();
    const victim = path.join(home, "victim");
    mkdirSync(victim, { recursive: true });
    writeFileSync(path.join(victim, "keep.txt"), "the operator's");
    const incoming = path.join(home, incomingRel(key));
    mkdirSync(path.dirname(incoming), { recursive: true });
    symlinkSync(victim, incoming);
    const err = await fanOut(inputs).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect({
      keep: existsSync(path.join(victim, "keep.txt")),
      refused: String((err as Error | undefined)?.message ?? "resolved"),
    }).toEqual({
      keep: true,
      refused: expect.stringMatching(/refusing to write into .*incoming\/.*: it is a symlink/),
    });
    expect(existsSync(path.join(home, ".cache/sparkform/llama-build/out", key))).toBe(false);
  });
});
