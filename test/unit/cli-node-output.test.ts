// What the CLI prints of a node's output, through the real transport with an `ssh` stand-in
// first on PATH: a server log's escapes made inert (issue 22 item 13), and `run`'s and
// `status --json`'s output whole through a pipe to a slow reader (item 12), in a real CLI
// process reading its stack from the stack cache (cli/stack-cache.ts).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { StackView } from "../../cli/stack";
import { cached, configKey, outputsKey, setCliBuild } from "../../cli/stack-cache";
import { parseStackConfig, sshTarget, type StackConfigData } from "../../components/stack-config";
import { closeAll } from "../../components/transport";
import { servingOutput } from "../support/stack-outputs";

const repoRoot = path.join(__dirname, "..", "..");
const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHotKQgqqiemTGB/6SmyM/G48iZRmJFDHA58qr3L3Kc3";
const work = fs.mkdtempSync(path.join(os.tmpdir(), "cli-node-output-"));
const fakeBin = path.join(work, "bin");
const remoteOut = path.join(work, "remote-stdout");

// The stand-in answers ssh's option probes (-G), a ControlMaster's exit (-O) and the first
// contact (`true`) as a node would, and prints remote-stdout for any other command.
fs.mkdirSync(fakeBin);
fs.writeFileSync(
  path.join(fakeBin, "ssh"),
  `#!/bin/sh
for a in "$@"; do case "$a" in -G|-O) exit 0;; esac; done
for a in "$@"; do last="$a"; done
[ "$last" = true ] && exit 0
cat '${remoteOut}'
`,
  { mode: 0o755 },
);

const config: StackConfigData = parseStackConfig({
  nodes: [{ name: "spark-1", host: "127.0.0.1", user: "spark", hostKey: HOST_KEY }],
  tree: { source: "/tmp", dest: "~/src/llama.cpp", exclude: [] },
});
const target = sshTarget(config.nodes[0] as StackConfigData["nodes"][number], config);
const view: StackView = {
  name: "t",
  config,
  outputs: { serving: servingOutput({ node: "spark-1", url: "http://127.0.0.1:8080" }) },
  recorded: {
    worker: {},
    server: {
      "spark-1": {
        node: "spark-1",
        port: 8080,
        bind: "127.0.0.1",
        binary: "/home/spark/out/bin/llama-server",
        standby: false,
      },
    },
    buildFlags: {},
  },
  target: () => target,
};

vi.mock("../../cli/stack", async (actual) => ({
  ...(await actual<typeof import("../../cli/stack")>()),
  readStack: () => view,
}));

const savedPath = process.env.PATH;
beforeAll(() => {
  process.env.PATH = `${fakeBin}:${savedPath ?? ""}`;
});
afterAll(() => {
  process.env.PATH = savedPath;
  closeAll();
});

describe("server logs (issue 22 item 13)", () => {
  afterEach(() => vi.restoreAllMocks());

  it("prints each log line terminal-safe: no control byte from the node reaches stdout", async () => {
    fs.writeFileSync(
      remoteOut,
      "srv  load: model loaded\n\x1b]0;owned\x07\x1b[2J\x1b[1;1Hhealth ok\rOK\u009b2K\n",
    );
    const written: string[] = [];
    vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => {
      written.push(String(s));
      return true;
    });
    const { run } = await import("../../cli/commands/server");
    expect(await run(["logs", "5"])).toBe(0);
    const text = written.join("");
    // eslint-disable-next-line no-control-regex -- the point
    expect(text).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/);
    expect(text).toBe(
      "srv  load: model loaded\n" +
        "\\u001b]0;owned\\u0007\\u001b[2J\\u001b[1;1Hhealth ok\\u000dOK\\u009b2K\n",
    );
  });
});

describe("a node's output through a pipe, from a real CLI process (issue 22 item 12)", () => {
  const stack = `pipe-${process.pid}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${fakeBin}:${savedPath ?? ""}`,
    SPARKFORM_STATE_DIR: path.join(work, "state"),
  };
  delete env.PULUMI_BACKEND_URL;
  // ~1.2 MB of lines, the last without a newline of its own.
  const lines = Array.from({ length: 20_000 }, (_, i) => `line ${i} ${"x".repeat(50)}`);
  const outputs = { facts: {}, big: "y".repeat(1_000_000) };
  const evidence = { facts: {}, build: {}, serving: {} };

  beforeAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- bin/ is CommonJS
    const bundle = require("../../bin/bundle") as {
      freshBundle(): string | undefined;
      build(): Promise<string>;
    };
    const file = bundle.freshBundle() ?? (await bundle.build());
    // The stack as the CLI reads it from its cache: the same keys, computed here.
    const saved = process.env.SPARKFORM_STATE_DIR;
    process.env.SPARKFORM_STATE_DIR = env.SPARKFORM_STATE_DIR as string;
    const backend = process.env.PULUMI_BACKEND_URL;
    delete process.env.PULUMI_BACKEND_URL;
    try {
      setCliBuild(path.basename(file, ".js"));
      cached(configKey(stack), () => ({
        config,
        targets: { "spark-1": target },
        privateKey: false,
      }));
      cached(outputsKey(stack), () => outputs);
      cached(outputsKey(stack, undefined, "evidence"), () => evidence);
    } finally {
      setCliBuild(undefined);
      process.env.SPARKFORM_STATE_DIR = saved;
      if (backend !== undefined) process.env.PULUMI_BACKEND_URL = backend;
    }
  }, 120_000);

  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  function throughPipe(args: string[]) {
    const piped = path.join(work, "piped");
    const r = spawnSync(
      "bash",
      [
        "-c",
        `${[process.execPath, path.join(repoRoot, "bin", "sparkform.js"), ...args].map(q).join(" ")} | { sleep 0.5; cat > ${q(piped)}; }; echo "\${PIPESTATUS[0]}"`,
      ],
      { encoding: "utf8", env, cwd: repoRoot },
    );
    return { status: Number(r.stdout.trim()), stderr: r.stderr, piped: fs.readFileSync(piped) };
  }

  it("`run`: the remote command's output arrives whole", () => {
    fs.writeFileSync(remoteOut, lines.join("\n"));
    const r = throughPipe(["run", "spark-1", "--stack", stack, "--", "cat", "big"]);
    expect(r.stderr).toBe("");
    expect(r.piped.length).toBe(Buffer.byteLength(`${lines.join("\n")}\n`));
    expect(r.piped.toString()).toBe(`${lines.join("\n")}\n`);
    expect(r.status).toBe(0);
  });

  it("`status --json`: the outputs and the state's evidence arrive whole", () => {
    const r = throughPipe(["status", "--json", "--stack", stack]);
    expect(r.stderr).toBe("");
    expect(r.piped.toString()).toBe(`${JSON.stringify({ ...outputs, evidence }, null, 2)}\n`);
    expect(r.status).toBe(0);
  });
});
