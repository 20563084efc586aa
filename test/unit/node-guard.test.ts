// The node programs that delete or overwrite directories (native/lib/guard.sh and its users),
// run as a node receives them with the local sh and a throwaway $HOME: the paths of issue 10
// item 1 are refused and leave the home, its .ssh and models intact; a build's store clean-up
// takes exactly its own key (item 2); shared entries stay until the last reference (item 4).
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { BUILD_PROGRAMS } from "../../components/build/commands";
import { programCommand } from "../../components/native-script";
import { NODE_DIR_PROGRAMS } from "../../components/tree/node-dir";
import { runLocally } from "../support/local-node";

const root = realpathSync(mkdtempSync(path.join(tmpdir(), "sparkform-guard-")));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let home: string;
let n = 0;

// As the transport delivers it: the launcher on the command line, the program on stdin.
function run(name: string, args: string[], env: Record<string, string> = {}) {
  return runLocally(programCommand(name, { args }), { home, env });
}

/** A home with what an operator cannot lose: authorized_keys, a model, a toolchain. */
function makeHome(): string {
  const h = path.join(root, `home-${++n}`, "spark");
  mkdirSync(path.join(h, ".ssh"), { recursive: true });
  writeFileSync(path.join(h, ".ssh", "authorized_keys"), "ssh-ed25519 AAAA operator\n");
  mkdirSync(path.join(h, "models", "org", "m"), { recursive: true });
  writeFileSync(path.join(h, "models", "org", "m", "model.gguf"), "weights");
  mkdirSync(path.join(h, ".asdf", "installs"), { recursive: true });
  return h;
}
function homeIntact(h: string) {
  expect(readFileSync(path.join(h, ".ssh", "authorized_keys"), "utf8")).toContain("operator");
  expect(readFileSync(path.join(h, "models", "org", "m", "model.gguf"), "utf8")).toBe("weights");
  expect(existsSync(path.join(h, ".asdf", "installs"))).toBe(true);
}

beforeEach(() => {
  home = makeHome();
});

describe("native/lib/guard.sh through prepare-dir.sh and remove-dir.sh", () => {
  const refusals: Array<[string, () => string, RegExp]> = [
    ["~", () => "~", /is \$HOME .* or contains it/],
    ["~/", () => "~/", /is \$HOME/],
    [".", () => ".", /'\.', '\.\.' or empty part/],
    ["$HOME spelled absolute", () => home, /is \$HOME/],
    ["/", () => "/", /empty part|root directory/],
    ["//", () => "//", /empty part|root/],
    ["the parent of $HOME", () => path.dirname(home), /contains it/],
    ["~/a/..", () => "~/a/..", /'\.\.'/],
    ["~/x//y", () => "~/x//y", /empty part/],
    [
      "a symlink to $HOME",
      () => {
        symlinkSync(home, path.join(home, "link-home"));
        return "~/link-home";
      },
      /is a symlink|is \$HOME/,
    ],
    [
      "a directory below a symlink to /",
      () => {
        symlinkSync("/", path.join(home, "to-root"));
        return "~/to-root/etc";
      },
      /through a symlink/,
    ],
    [
      "a directory below a symlink to $HOME",
      () => {
        symlinkSync(home, path.join(home, "up"));
        return "~/up/.ssh";
      },
      /through a symlink/,
    ],
  ];

  it.each(refusals)("refuses %s on write and delete, and the home stays intact", (_n, dest, re) => {
    const d = dest();
    const w = run(NODE_DIR_PROGRAMS.prepare, ["make", d]);
    expect([w.status, w.stderr]).toEqual([97, expect.stringMatching(re)]);
    expect(w.stderr).toMatch(/^sparkform guard: refusing to write into /);
    const rm = run(NODE_DIR_PROGRAMS.remove, ["rm", d]);
    expect([rm.status, rm.stderr]).toEqual([97, expect.stringMatching(re)]);
    homeIntact(home);
    expect(existsSync(path.join(home, "to-root")) ? readdirSync("/etc").length > 0 : true).toBe(
      true,
    );
  });

  it("prepare creates a directory below $HOME and says whether it was there", () => {
    let r = run(NODE_DIR_PROGRAMS.prepare, ["make", "~/src/llama.cpp"]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      path: path.join(home, "src/llama.cpp"),
      created: true,
    });
    writeFileSync(path.join(home, "src/llama.cpp/x"), "x");
    r = run(NODE_DIR_PROGRAMS.prepare, ["make", "src/llama.cpp"]);
    expect(JSON.parse(r.stdout)).toEqual({
      path: path.join(home, "src/llama.cpp"),
      created: false,
    });
    writeFileSync(path.join(home, "afile"), "f");
    r = run(NODE_DIR_PROGRAMS.prepare, ["make", "~/afile"]);
    expect([r.status, r.stderr]).toEqual([97, expect.stringMatching(/not a directory/)]);
  });

  it("an entry two resources reference is removed with the last reference, only if sparkform made it", () => {
    const a = "tok-a-0001";
    const b = "tok-b-0002";
    expect(run(NODE_DIR_PROGRAMS.prepare, ["make", "~/.tc", a]).status).toBe(0);
    writeFileSync(path.join(home, ".tc", "bin"), "erl");
    expect(JSON.parse(run(NODE_DIR_PROGRAMS.prepare, ["make", "~/.tc", b]).stdout).created).toBe(
      false,
    );
    let r = run(NODE_DIR_PROGRAMS.remove, ["rm", "~/.tc", a]);
    expect(JSON.parse(r.stdout)).toMatchObject({ removed: false, refsLeft: 1, last: false });
    expect(existsSync(path.join(home, ".tc", "bin"))).toBe(true);
    r = run(NODE_DIR_PROGRAMS.remove, ["rm", "~/.tc", b]);
    expect(JSON.parse(r.stdout)).toMatchObject({ removed: true, refsLeft: 0, created: true });
    expect(existsSync(path.join(home, ".tc"))).toBe(false);
    expect(readdirSync(path.join(home, ".cache/sparkform/refs"))).toEqual([]);

    // check creates nothing; ref records what the check said, after the files are in place.
    const c = run(NODE_DIR_PROGRAMS.prepare, ["check", "~/m/rev"]);
    expect(JSON.parse(c.stdout)).toEqual({ path: path.join(home, "m/rev"), created: true });
    expect(existsSync(path.join(home, "m"))).toBe(false);
    mkdirSync(path.join(home, "m/rev"), { recursive: true });
    writeFileSync(path.join(home, "m/rev/f.gguf"), "w");
    expect(
      JSON.parse(run(NODE_DIR_PROGRAMS.prepare, ["ref", "~/m/rev", a, "true"]).stdout),
    ).toEqual({
      path: path.join(home, "m/rev"),
      created: true,
    });
    expect(JSON.parse(run(NODE_DIR_PROGRAMS.remove, ["unref", "~/m/rev", a]).stdout)).toMatchObject(
      {
        removed: false,
        last: true,
        created: true,
      },
    );
    expect(existsSync(path.join(home, "m/rev/f.gguf"))).toBe(true); // unref removes nothing

    // A directory that was there (with files) before sparkform's first reference is kept.
    mkdirSync(path.join(home, "mine"));
    writeFileSync(path.join(home, "mine", "notes"), "n");
    expect(JSON.parse(run(NODE_DIR_PROGRAMS.prepare, ["make", "~/mine", a]).stdout).created).toBe(
      false,
    );
    r = run(NODE_DIR_PROGRAMS.remove, ["rm", "~/mine", a]);
    expect(JSON.parse(r.stdout)).toMatchObject({ removed: false, last: true, created: false });
    expect(readFileSync(path.join(home, "mine", "notes"), "utf8")).toBe("n");
    homeIntact(home);
  });
});

describe("native/build install and delete: exactly one key's store entries", () => {
  const flagKey = "0123456789ab";
  const commandKey = `${flagKey}-89abcdef`; // plan.ts: the flag key plus -<8 hex>
  const setup = () => {
    const build = path.join(home, "build");
    mkdirSync(path.join(build, "bin"), { recursive: true });
    writeFileSync(path.join(build, "bin/a"), "a", { mode: 0o755 });
    return { build, out: path.join(home, ".cache/sparkform/llama-build/out") };
  };
  const install = (out: string, key: string, build: string, env = {}) =>
    run(BUILD_PROGRAMS.install, [out, key, build, "bin/a"], env);

  it("installing and destroying the CMake build leaves the command build's entry", () => {
    const { build, out } = setup();
    expect(install(out, commandKey, build).status).toBe(0);
    const commandEntry = readlinkSync(path.join(out, commandKey));
    const r = install(out, flagKey, build);
    expect(r.status, r.stderr).toBe(0);
    expect(install(out, flagKey, build).status).toBe(0); // prunes the flag key's older entry
    expect(existsSync(path.join(out, commandEntry))).toBe(true);
    expect(readFileSync(path.join(out, commandKey, "bin/a"), "utf8")).toBe("a");
    expect(readdirSync(path.join(out, ".store"))).toHaveLength(2);

    const d = run(BUILD_PROGRAMS.remove, ["", out, flagKey]);
    expect(d.status, d.stderr).toBe(0);
    expect(existsSync(path.join(out, flagKey))).toBe(false);
    expect(readFileSync(path.join(out, commandKey, "bin/a"), "utf8")).toBe("a");
    expect(readdirSync(path.join(out, ".store"))).toEqual([path.basename(commandEntry)]);
  });

  it("a key referenced by two stacks stays until the last destroy", () => {
    const { build, out } = setup();
    expect(install(out, flagKey, build, { SPARKFORM_REF: "stack-a" }).status).toBe(0);
    expect(install(out, flagKey, build, { SPARKFORM_REF: "stack-b" }).status).toBe(0);
    let d = run(BUILD_PROGRAMS.remove, [path.join(home, "bd"), out, flagKey], {
      SPARKFORM_REF: "stack-a",
    });
    expect([d.status, d.stdout.trim()]).toEqual([0, "kept 1"]);
    expect(readFileSync(path.join(out, flagKey, "bin/a"), "utf8")).toBe("a");
    d = run(BUILD_PROGRAMS.remove, ["", out, flagKey], { SPARKFORM_REF: "stack-b" });
    expect([d.status, d.stdout.trim()]).toEqual([0, "removed"]);
    expect(existsSync(path.join(out, flagKey))).toBe(false);
  });

  it("refuses an out dir that is $HOME or a symlink to it, and a key that is not a name", () => {
    const { build } = setup();
    symlinkSync(home, path.join(home, "out-link"));
    for (const out of [home, "~/out-link", "/"]) {
      const r = run(BUILD_PROGRAMS.remove, ["", out, flagKey]);
      expect(r.status, out).toBe(97);
      expect(install(out, flagKey, build).status).toBe(97);
    }
    expect(run(BUILD_PROGRAMS.remove, ["", path.join(home, "o"), "../x"]).status).toBe(2);
    expect(run(BUILD_PROGRAMS.remove, [home, path.join(home, "o"), flagKey]).status).toBe(97);
    homeIntact(home);
  });
});

describe("model-fetch.py: the same checks in Python before it writes or deletes", () => {
  const py = (cmd: string, spec: Record<string, unknown>) => {
    const r = run("model/model-fetch.py", [cmd, JSON.stringify(spec)]);
    return { status: r.status, stderr: r.stderr };
  };
  const file = (p: string) => ({
    path: p,
    size: 1,
    sha256: "0".repeat(64),
    url: "http://127.0.0.1:9/x",
  });

  it.each([
    [
      "remove with the home as root",
      "remove",
      { dir: "~/models/org/m", root: "~", files: [{ path: "model.gguf" }] },
      /refusing to delete from ~: it is \$HOME/,
    ],
    [
      "remove of a model dir that is a symlink to the home",
      "remove",
      { dir: "~/models/link", root: "~/models", files: [{ path: ".ssh/authorized_keys" }] },
      /refusing to delete from ~\/models\/link: it (is a symlink|is \$HOME)/,
    ],
    [
      "prepare with a file path climbing out",
      "prepare",
      { dir: "~/models/org/m", files: [file("../../../.ssh/authorized_keys")] },
      /refusing file path '\.\.\/\.\.\/\.\.\/\.ssh\/authorized_keys'/,
    ],
    [
      "fetch into a dir through a symlink to /",
      "fetch",
      { dir: "~/to-root/tmp/m", files: [file("x")] },
      /through a symlink/,
    ],
  ])("refuses %s (exit 97); the home stays", (_n, cmd, spec, re) => {
    symlinkSync(home, path.join(home, "models", "link"));
    symlinkSync("/", path.join(home, "to-root"));
    const r = py(cmd, spec);
    expect([r.status, r.stderr]).toEqual([97, expect.stringMatching(re)]);
    homeIntact(home);
  });
});
