// openNode without a network: one object per target identity, validated once, its files
// written once, and removed on every way out of the process (close, exit, SIGINT, SIGTERM).
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { closeAll, openNode } from "../../components/transport/node-connection";
import type { SshTarget } from "../../components/transport/connection";

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBx6dGfxR1uSVCw4Ng0zJ7hWk3qzlB0Z7yU7sYVvW8o+";
// Shaped like a key (validateTarget checks the armour); nothing here connects.
const PRIVATE =
  "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----";
const node: SshTarget = {
  name: "spark-1",
  host: "192.0.2.10",
  port: 22,
  user: "spark",
  hostKey: KEY,
};

afterAll(() => closeAll());

describe("openNode", () => {
  it("returns the same connection for the same target, a new one for another identity", () => {
    const a = openNode(node);
    expect(openNode({ ...node })).toBe(a);
    expect(openNode({ ...node, privateKey: PRIVATE })).not.toBe(a);
    expect(openNode({ ...node, jump: { host: "j", user: "u", hostKey: KEY } })).not.toBe(a);
  });

  it("writes the pinned known_hosts and the key copy once, 0600, at open", () => {
    const c = openNode({ ...node, name: "files", privateKey: PRIVATE });
    expect(fs.readFileSync(c.files.knownHosts, "utf8")).toBe(`sparkform.files ${KEY}\n`);
    expect(fs.readFileSync(c.files.keyFile ?? "", "utf8")).toBe(`${PRIVATE}\n`);
    for (const f of [c.files.knownHosts, c.files.keyFile ?? ""])
      expect(fs.statSync(f).mode & 0o777).toBe(0o600);
    const before = fs.statSync(c.files.knownHosts).mtimeMs;
    openNode({ ...node, name: "files", privateKey: PRIVATE });
    expect(fs.statSync(c.files.knownHosts).mtimeMs).toBe(before);
    c.close();
    expect(fs.existsSync(c.files.knownHosts)).toBe(false);
    expect(fs.existsSync(c.files.keyFile ?? "")).toBe(false);
  });

  it("validates at open, naming the field, and keeps nothing of an invalid target", () => {
    expect(() => openNode({ ...node, host: "-oProxyCommand=sh" })).toThrow(/starts with "-"/);
    expect(() => openNode({ ...node, name: "bad", port: 0 })).toThrow(
      'node "bad" port must be an integer 1-65535, got 0',
    );
  });

  it("refuses commands on a closed connection, saying how to reopen", async () => {
    const c = openNode({ ...node, name: "closed" });
    c.close();
    await expect(c.run(["true"], { step: "x" })).rejects.toThrow(
      'the connection to node "closed" was closed; open it again with openNode(target)',
    );
    expect(openNode({ ...node, name: "closed" })).not.toBe(c);
  });
});

/**
 * A child process that opens a connection with a secret key, prints its files, and waits;
 * `how` decides how it ends.
 */
async function childWithKey(how: "SIGTERM" | "SIGINT" | "exit"): Promise<{
  files: { knownHosts: string; keyFile: string };
  code: number | null;
  signal: NodeJS.Signals | null;
}> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sf-nc-"));
  const script = path.join(dir, "child.ts");
  const mod = path.resolve(__dirname, "../../components/transport/node-connection");
  fs.writeFileSync(
    script,
    [
      `import { openNode } from ${JSON.stringify(mod)};`,
      `const c = openNode(${JSON.stringify({ ...node, name: "child", privateKey: PRIVATE })});`,
      "process.stdout.write(JSON.stringify(c.files) + '\\n');",
      how === "exit" ? "setTimeout(() => process.exit(0), 200);" : "setInterval(() => {}, 1000);",
    ].join("\n"),
  );
  // Loaded the way a dynamic-provider process loads provider modules (providers/delegate.ts):
  // execa through node's own require(esm), then tsx's CommonJS hook for the TypeScript.
  const child = spawn(
    process.execPath,
    ["-e", `require("execa"); require("tsx/cjs"); require(${JSON.stringify(script)});`],
    { cwd: path.resolve(__dirname, "../.."), stdio: ["ignore", "pipe", "inherit"] },
  );
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        if (out.includes("\n")) resolve(out.split("\n")[0] ?? "");
      });
      child.on("exit", () => reject(new Error(`child ended before printing its files: ${out}`)));
    });
    const files = JSON.parse(line) as { knownHosts: string; keyFile: string };
    // The files exist while the process lives.
    expect(fs.existsSync(files.keyFile)).toBe(true);
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("exit", (code, signal) => resolve({ code, signal })),
    );
    if (how !== "exit") child.kill(how);
    return { files, ...(await ended) };
  } finally {
    child.kill("SIGKILL");
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe("a process that opened a connection", () => {
  it.each(["SIGTERM", "SIGINT"] as const)(
    "removes its key file and known_hosts on %s, and still ends by it",
    async (sig) => {
      const r = await childWithKey(sig);
      expect(fs.existsSync(r.files.keyFile)).toBe(false);
      expect(fs.existsSync(r.files.knownHosts)).toBe(false);
      expect(fs.existsSync(path.dirname(r.files.keyFile))).toBe(false);
      // Re-raised after the clean-up: the process ends by the signal, as without the hook.
      expect(r.signal).toBe(sig);
    },
  );

  it("removes them on a plain exit", async () => {
    const r = await childWithKey("exit");
    expect(r.code).toBe(0);
    expect(fs.existsSync(r.files.keyFile)).toBe(false);
  });
});
