import * as pulumi from "@pulumi/pulumi";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { delegatingProvider } from "../../components/providers/delegate";

const root = mkdtempSync(path.join(os.tmpdir(), "sf-delegate-"));
const home = process.cwd();

/** A project directory holding an implementation module that reports where it was loaded from. */
function checkout(name: string): string {
  const dir = path.join(root, name);
  mkdirSync(path.join(dir, "impl"), { recursive: true });
  writeFileSync(
    path.join(dir, "impl", "provider.js"),
    "exports.create = async () => ({ id: __filename, outs: {} });\n",
  );
  return dir;
}

afterEach(() => process.chdir(home));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("delegatingProvider", () => {
  it("captures the module path relative to the project, not the checkout's absolute path", async () => {
    const a = checkout("a");
    process.chdir(a);
    const provider = delegatingProvider(path.join(a, "impl", "provider.js"));
    const serialized = await pulumi.runtime.serializeFunction(() => provider);
    expect(serialized.text).toContain('relFile: "impl/provider.js"');
    expect(serialized.text).not.toContain(a);
  });

  it("loads the module of the checkout it runs in (a moved checkout needs no up)", async () => {
    const a = checkout("first");
    process.chdir(a);
    const provider = delegatingProvider(path.join(a, "impl", "provider.js"));
    expect((await provider.create({})).id).toBe(path.join(a, "impl", "provider.js"));
    const b = checkout("moved");
    process.chdir(b);
    expect((await provider.create({})).id).toBe(path.join(b, "impl", "provider.js"));
  });

  it("outside a checkout: says where it looked and what to do", async () => {
    const a = checkout("c");
    process.chdir(a);
    const provider = delegatingProvider(path.join(a, "impl", "provider.js"));
    const elsewhere = path.join(root, "empty");
    mkdirSync(elsewhere);
    process.chdir(elsewhere);
    await expect(provider.create({})).rejects.toThrow(
      `sparkform provider module impl/provider.js is not under ${elsewhere}: run pulumi in the project directory`,
    );
  });
});
