// Issue 33 item 9, on the node: native/model/model-fetch.py `remove` (a file dropped from a
// model by an update) never deletes a file that another reference to the same revision's
// directory still lists. Two resources (two stages, or two stacks) share
// `<modelsDir>/<repo>/<commit>` on a node through references (native/lib/guard.sh, recorded
// here by the real native/tree/prepare-dir.sh); each one's file list is recorded beside its
// reference by `measure` with `ref`. $HOME is a scratch directory, so the references land in
// its ~/.cache/sparkform/refs as on a node.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execa } from "execa";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { FETCH_SCRIPT } from "../../components/model/provider";

const root = path.join(__dirname, "..", "..");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-model-refs-"));
let home: string;
let dir: string;
let n = 0;
const COMMIT = "c".repeat(40);
const TOK_A = "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa";
const TOK_B = "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb";
const TOK_C = "33333333-cccc-4ccc-8ccc-cccccccccccc";

afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
beforeEach(() => {
  home = path.join(tmp, `home-${++n}`);
  dir = path.join(home, "models", "org", "m", COMMIT);
  fs.mkdirSync(dir, { recursive: true });
  for (const f of ["a.gguf", "b.gguf", "sub/c.gguf"]) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.writeFileSync(path.join(dir, f), f);
  }
});

const env = () => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home });

async function script(cmd: string, spec: Record<string, unknown>) {
  const r = await execa("python3", [FETCH_SCRIPT, cmd, JSON.stringify(spec)], {
    reject: false,
    extendEnv: false,
    env: env(),
  });
  const result = String(r.stdout)
    .split("\n")
    .filter((l) => l.startsWith("@result "))
    .map((l) => JSON.parse(l.slice("@result ".length)) as Record<string, unknown>)
    .at(-1);
  return { status: r.exitCode, result, stderr: String(r.stderr) };
}

/** A resource's reference to `dir`, as ModelReplica records it (prepare-dir.sh ref). */
async function reference(token: string) {
  const r = await execa(
    "sh",
    [
      path.join(root, "native", "tree", "prepare-dir.sh"),
      "ref",
      "~/models/org/m/" + COMMIT,
      token,
      "true",
    ],
    { extendEnv: false, env: env() },
  );
  expect(r.exitCode).toBe(0);
}

/** What converge's last measure records: the resource's files, listed beside its reference. */
async function lists(token: string, files: string[]) {
  const r = await script("measure", {
    dir: "~/models/org/m/" + COMMIT,
    files: files.map((p) => ({ path: p })),
    hash: false,
    ref: token,
  });
  expect(r.status).toBe(0);
}

const remove = (token: string | undefined, files: string[]) =>
  script("remove", {
    dir: "~/models/org/m/" + COMMIT,
    root: "~/models",
    files: files.map((p) => ({ path: p })),
    ...(token ? { ref: token } : {}),
  });
const present = (f: string) => fs.existsSync(path.join(dir, f));

describe("model-fetch.py remove keeps what another reference lists", () => {
  it("drops only the files no other reference of the directory lists", async () => {
    await reference(TOK_A);
    await lists(TOK_A, ["a.gguf", "b.gguf", "sub/c.gguf"]);
    await reference(TOK_B);
    await lists(TOK_B, ["a.gguf", "sub/c.gguf"]);
    // A's update dropped all three: b.gguf is A's alone, the others B still lists.
    const real = fs.realpathSync(dir);
    const r = await remove(TOK_A, ["a.gguf", "b.gguf", "sub/c.gguf"]);
    expect(r.status).toBe(0);
    expect(r.result).toEqual({
      removed: [path.join(real, "b.gguf")],
      kept: ["a.gguf", "sub/c.gguf"],
    });
    expect([present("a.gguf"), present("b.gguf"), present("sub/c.gguf")]).toEqual([
      true,
      false,
      true,
    ]);
  });

  it("a reference with no list (state from before the lists) keeps every file", async () => {
    await reference(TOK_A);
    await lists(TOK_A, ["a.gguf", "b.gguf"]);
    await reference(TOK_C);
    const r = await remove(TOK_A, ["b.gguf"]);
    expect(r.status).toBe(0);
    expect(r.result).toEqual({ removed: [], kept: ["b.gguf"] });
    expect(present("b.gguf")).toBe(true);
  });

  it("a list whose reference is gone (its resource destroyed) keeps nothing", async () => {
    await reference(TOK_A);
    await lists(TOK_A, ["a.gguf"]);
    // B listed b.gguf, then was destroyed: remove-dir.sh unref dropped its reference.
    await reference(TOK_B);
    await lists(TOK_B, ["b.gguf"]);
    const unref = await execa(
      "sh",
      [
        path.join(root, "native", "tree", "remove-dir.sh"),
        "unref",
        "~/models/org/m/" + COMMIT,
        TOK_B,
      ],
      { extendEnv: false, env: env() },
    );
    expect(unref.exitCode).toBe(0);
    const r = await remove(TOK_A, ["b.gguf"]);
    expect(r.result).toMatchObject({ kept: [] });
    expect(present("b.gguf")).toBe(false);
  });

  it("with no reference left (a destroy's last one), every named file goes", async () => {
    const r = await remove(undefined, ["a.gguf", "b.gguf"]);
    expect(r.status).toBe(0);
    expect(r.result).toMatchObject({ kept: [] });
    expect([present("a.gguf"), present("b.gguf"), present("sub/c.gguf")]).toEqual([
      false,
      false,
      true,
    ]);
  });
});
