// What the CLI prints of a node's output, through the real transport with an `ssh` stand-in
// first on PATH: a server log's escapes made inert (issue 22 item 13).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { StackView } from "../../cli/stack";
import { parseStackConfig, sshTarget, type StackConfigData } from "../../components/config";
import { closeAll } from "../../components/transport/ssh";

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
  outputs: { serving: { server: { node: "spark-1", url: "http://127.0.0.1:8080" } } },
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
