// native/router/files.sh, run from the checkout against a throwaway $HOME: the binary checked
// by sha256 before it is installed, the config written whole, and a delete that removes only
// what no other router on the node uses.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";

const DIR = "~/.cache/sparkform/router";
let home: string;
const dir = () => path.join(home, ".cache/sparkform/router");
const run = (...args: string[]) => runWith({}, ...args);
const runWith = (env: Record<string, string>, ...args: string[]) => {
  const r = spawnSync("sh", [programPath("router/files.sh"), ...args], {
    env: { PATH: "/usr/bin:/bin", HOME: home, ...env },
    encoding: "utf8",
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
};
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const BIN = "#!/bin/sh\necho caddy\n";
const NAME = `caddy-${sha(BIN).slice(0, 16)}`;
const arrive = (text = BIN, name = NAME) => writeFileSync(path.join(dir(), `.${name}.tmp`), text);

beforeEach(() => {
  home = mkdtempSync(path.join(os.tmpdir(), "sparkform-router-files-"));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

describe("native/router/files.sh", () => {
  it("installs a binary whose sha256 is the expected one, and the config", () => {
    expect(run("check", DIR, NAME, sha(BIN))).toMatchObject({ code: 0, out: "have=0\n" });
    arrive();
    const r = run("install", DIR, NAME, sha(BIN), "8000", '{"a":1}\n');
    expect(r.code).toBe(0);
    expect(r.out).toContain(`configDigest=${sha('{"a":1}\n')}`);
    expect(readFileSync(path.join(dir(), "router-8000.json"), "utf8")).toBe('{"a":1}\n');
    expect(existsSync(path.join(dir(), `.${NAME}.tmp`))).toBe(false);
    expect(spawnSync(path.join(dir(), NAME)).stdout.toString()).toBe("caddy\n");
    expect(run("check", DIR, NAME, sha(BIN)).out).toBe("have=1\n");
    expect(run("digest", DIR, "8000").out).toBe(
      `configDigest=${sha('{"a":1}\n')}\nbinary=${NAME}\ndrained=\nkeyDigest=\n`,
    );
  });

  it("reports the upstreams a roll left drained; the next install and a remove take the drain file away", () => {
    mkdirSync(dir(), { recursive: true });
    arrive();
    expect(run("install", DIR, NAME, sha(BIN), "8000", "{}").code).toBe(0);
    const drain = path.join(dir(), "router-8000.drain");
    writeFileSync(drain, "10.0.0.2:8080\n127.0.0.1:8080\n");
    expect(run("digest", DIR, "8000").out).toContain("drained=10.0.0.2:8080 127.0.0.1:8080\n");
    expect(run("install", DIR, NAME, sha(BIN), "8000", "{}").code).toBe(0);
    expect(existsSync(drain)).toBe(false);
    expect(run("digest", DIR, "8000").out).toContain("drained=\n");
    writeFileSync(drain, "10.0.0.2:8080\n");
    expect(run("remove", DIR, "8000").code).toBe(0);
    expect(existsSync(drain)).toBe(false);
  });

  it("writes the key that arrives as SPARKFORM_API_KEY to a 0600 file, reports its sha256, removes it", () => {
    mkdirSync(dir(), { recursive: true });
    arrive();
    const key = "0123456789abcdef0123456789abcdef";
    const r = runWith({ SPARKFORM_API_KEY: key }, "install", DIR, NAME, sha(BIN), "8000", "{}");
    expect(r.code).toBe(0);
    expect(r.out + r.err).not.toContain(key);
    const file = path.join(dir(), "router-8000.key");
    expect(readFileSync(file, "utf8")).toBe(`${key}\n`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(run("digest", DIR, "8000").out).toContain(`keyDigest=${sha(key)}\n`);
    // The header a person's curl sends (`curl -H @file`), 0600 too.
    const header = path.join(dir(), "router-8000.header");
    expect(readFileSync(header, "utf8")).toBe(`Authorization: Bearer ${key}\n`);
    expect(statSync(header).mode & 0o777).toBe(0o600);
    // An install with no key removes the file (a keyless router checks none).
    expect(run("install", DIR, NAME, sha(BIN), "8000", "{}").code).toBe(0);
    expect(existsSync(file)).toBe(false);
    expect(existsSync(header)).toBe(false);
    runWith({ SPARKFORM_API_KEY: key }, "install", DIR, NAME, sha(BIN), "8000", "{}");
    expect(run("remove", DIR, "8000").code).toBe(0);
    expect(existsSync(file)).toBe(false);
  });

  it("refuses (exit 7) and removes a binary that is not the expected one", () => {
    mkdirSync(dir(), { recursive: true });
    arrive("tampered");
    const r = run("install", DIR, NAME, sha(BIN), "8000", "{}");
    expect(r.code).toBe(7);
    expect(r.err).toMatch(/expected [0-9a-f]{64}/);
    expect(existsSync(path.join(dir(), NAME))).toBe(false);
    expect(existsSync(path.join(dir(), "router-8000.json"))).toBe(false);
    expect(existsSync(path.join(dir(), `.${NAME}.tmp`))).toBe(false);
  });

  it("removes a port's files, and the binary only when no other router names it", () => {
    mkdirSync(dir(), { recursive: true });
    arrive();
    expect(run("install", DIR, NAME, sha(BIN), "8000", "{}").code).toBe(0);
    expect(run("install", DIR, NAME, sha(BIN), "8001", "{}").code).toBe(0);
    mkdirSync(path.join(dir(), "data-8000", "caddy"), { recursive: true });
    expect(run("remove", DIR, "8000").code).toBe(0);
    expect(existsSync(path.join(dir(), "router-8000.json"))).toBe(false);
    expect(existsSync(path.join(dir(), "data-8000"))).toBe(false);
    expect(existsSync(path.join(dir(), NAME))).toBe(true);
    const r = run("remove", DIR, "8001");
    expect(r.out).toContain(`removed=${NAME}`);
    expect(existsSync(dir())).toBe(false);
    expect(run("remove", DIR, "8001").code).toBe(0);
  });

  it("refuses bad arguments", () => {
    expect(run("install", DIR, "../x", sha(BIN), "8000", "{}").code).toBe(2);
    expect(run("digest", DIR, "80a").code).toBe(2);
    expect(run("check", "relative", NAME, sha(BIN)).code).toBe(2);
  });
});
