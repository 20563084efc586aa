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

/** A checkout whose module exports `source` (CommonJS text) as impl/provider.js. */
function checkoutWith(name: string, source: string): string {
  const dir = path.join(root, name);
  mkdirSync(path.join(dir, "impl"), { recursive: true });
  writeFileSync(path.join(dir, "impl", "provider.js"), source);
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

  it("prefers the module's `provider` object to its named exports", async () => {
    const a = checkoutWith(
      "object",
      [
        'exports.create = async () => ({ id: "named", outs: {} });',
        "exports.provider = {",
        '  create: async () => ({ id: "object", outs: {} }),',
        "  diff: async () => ({ changes: true, replaces: [] }),",
        "};",
      ].join("\n"),
    );
    process.chdir(a);
    const provider = delegatingProvider(path.join(a, "impl", "provider.js"));
    expect((await provider.create({})).id).toBe("object");
    expect(await provider.diff!("id", {}, {})).toEqual({ changes: true, replaces: [] });
    // What the object leaves out gets the defaults, as for a module of named exports.
    expect(await provider.read!("id", { p: 1 })).toEqual({ id: "id", props: { p: 1 } });
    await expect(provider.update!("id", {}, {})).rejects.toThrow(
      "impl/provider.js does not implement update; this is a sparkform bug",
    );
  });

  it("still loads a module of named exports only (what older state refers to)", async () => {
    const a = checkoutWith(
      "named",
      [
        'exports.create = async () => ({ id: "named", outs: {} });',
        "exports.delete = async () => { globalThis.__sfDeleted = true; };",
      ].join("\n"),
    );
    process.chdir(a);
    const provider = delegatingProvider(path.join(a, "impl", "provider.js"));
    expect((await provider.create({})).id).toBe("named");
    await provider.delete!("id", {});
    expect((globalThis as { __sfDeleted?: boolean }).__sfDeleted).toBe(true);
  });

  it("every stage's provider module exports `provider` with the same methods as its named exports", async () => {
    for (const stage of ["node", "tree", "toolchain", "build", "model"]) {
      const mod = (await import(`../../components/${stage}/provider`)) as Record<
        string,
        unknown
      > & {
        provider: Record<string, unknown>;
      };
      for (const m of ["create", "read", "diff", "update", "delete"]) {
        expect(mod.provider[m], `${stage} provider.${m}`).toBe(mod[m]);
      }
    }
  });
});
