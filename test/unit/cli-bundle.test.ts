// The CLI bundle (bin/bundle.js, issue 25 goal 1): stale as soon as any input changes (an edit
// that keeps size and mtime, a file added beside the sources), each module's __dirname its own,
// the real CLI's bundle loading no command module for `--help` and no @pulumi package for the
// commands of the loop, and a V8 code cache per command.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { commands } from "../../cli/main";

interface Bundler {
  freshBundle(o?: { root: string; outDir: string }): string | undefined;
  build(o?: { root: string; entry: string; outDir: string }): Promise<string>;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports -- bin/ is CommonJS
const bundler = require("../../bin/bundle") as Bundler;
const repoRoot = path.join(__dirname, "..", "..");

describe("a bundle of a small project", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "cli-bundle-"));
  const project = {
    root,
    entry: path.join(root, "src", "main.ts"),
    outDir: path.join(root, "out"),
  };
  const lib = path.join(root, "src", "lib", "value.ts");
  const runBundle = (file: string) =>
    spawnSync(process.execPath, ["-e", `require(${JSON.stringify(file)}).cli()`], {
      encoding: "utf8",
    }).stdout;

  // Whole seconds, so the edit below can put the very same mtime back.
  const mtime = 1_700_000_000;
  beforeAll(() => {
    fs.mkdirSync(path.dirname(lib), { recursive: true });
    fs.writeFileSync(lib, 'export const value: string = "one";\nexport const here = __dirname;\n');
    fs.utimesSync(lib, mtime, mtime);
    fs.writeFileSync(
      project.entry,
      'import { here, value } from "./lib/value";\n' +
        "export function cli(): void {\n  console.log(`${value} ${here} ${__dirname}`);\n}\n",
    );
  });

  it("runs, with each module's own __dirname", async () => {
    const file = await bundler.build(project);
    expect(bundler.freshBundle(project)).toBe(file);
    expect(runBundle(file)).toBe(`one ${path.dirname(lib)} ${path.dirname(project.entry)}\n`);
  });

  it("is stale after an edit that keeps the size and the mtime, and rebuilt with it", async () => {
    const file = bundler.freshBundle(project) as string;
    expect(file).toBeDefined();
    const st = fs.statSync(lib);
    fs.writeFileSync(lib, fs.readFileSync(lib, "utf8").replace('"one"', '"two"'));
    fs.utimesSync(lib, mtime, mtime);
    expect(fs.statSync(lib).size).toBe(st.size);
    expect(fs.statSync(lib).mtimeMs).toBe(st.mtimeMs);
    expect(bundler.freshBundle(project)).toBeUndefined();
    expect(runBundle(await bundler.build(project))).toMatch(/^two /);
  });

  it("is stale when a file appears beside the sources (an import could now resolve to it)", async () => {
    await bundler.build(project);
    expect(bundler.freshBundle(project)).toBeDefined();
    fs.writeFileSync(path.join(path.dirname(lib), "value.js"), "exports.value = 'shadow';\n");
    expect(bundler.freshBundle(project)).toBeUndefined();
  });

  it("is stale when its manifest names a bundle that is gone", async () => {
    const file = await bundler.build(project);
    fs.rmSync(file);
    expect(bundler.freshBundle(project)).toBeUndefined();
  });
});

describe("the CLI's bundle", () => {
  let file: string;
  beforeAll(async () => {
    file = bundler.freshBundle() ?? (await bundler.build());
  }, 120_000);

  /** Loaded modules (node_modules packages and bundle-internal markers) after `script`. */
  const loadedAfter = (script: string): string[] =>
    JSON.parse(
      spawnSync(
        process.execPath,
        [
          "-e",
          `const cli = require(${JSON.stringify(file)}); ${script}; ` +
            "process.stdout.write(JSON.stringify(Object.keys(require.cache)))",
        ],
        { encoding: "utf8", cwd: repoRoot },
      ).stdout,
    ) as string[];

  it("loads no package for the command listing", () => {
    const loaded = loadedAfter("cli.usage()");
    expect(loaded.filter((m) => m.includes("node_modules"))).toEqual([]);
  });

  it("loads no @pulumi package for `run`, `status`, `server`, `worker` (it binds on first use)", () => {
    const loaded = loadedAfter(
      "for (const c of ['run', 'status', 'server', 'worker']) cli.commands[c].load()",
    );
    expect(loaded.filter((m) => m.includes("@pulumi"))).toEqual([]);
  });

  it("`--help` lists every command with the summary its module gives (where it still has one)", () => {
    const r = spawnSync(
      process.execPath,
      [
        "-e",
        `const cli = require(${JSON.stringify(file)}); const r = {}; ` +
          "for (const [n, e] of Object.entries(cli.commands)) { const m = e.load(); " +
          "r[n] = { listed: e.summary, own: m.summary ?? e.summary, usage: m.usage.split(' ')[1] }; } " +
          "process.stdout.write(JSON.stringify(r))",
      ],
      { encoding: "utf8", cwd: repoRoot },
    );
    const seen = JSON.parse(r.stdout) as Record<
      string,
      { listed: string; own: string; usage: string }
    >;
    expect(Object.keys(seen)).toEqual(Object.keys(commands));
    for (const [name, c] of Object.entries(seen)) {
      expect({ name, listed: c.listed, usage: c.usage }).toEqual({
        name,
        listed: c.own,
        usage: "sparkform",
      });
    }
  });

  it("keeps a V8 code cache per command after its first run, and none for a typo", () => {
    const stem = file.slice(0, -".js".length);
    for (const f of [`${stem}.llama-source.v8cache`, `${stem}.lama-source.v8cache`])
      fs.rmSync(f, { force: true });
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [path.join(repoRoot, "bin", "sparkform.js"), ...args], {
        encoding: "utf8",
        cwd: repoRoot,
      });
    expect(cli("llama-source", "--help").stdout).toMatch(/^usage: sparkform llama-source/);
    expect(fs.existsSync(`${stem}.llama-source.v8cache`)).toBe(true);
    expect(cli("llama-source", "--help").stdout).toMatch(/^usage: sparkform llama-source/);
    expect(cli("lama-source").status).toBe(2);
    expect(fs.existsSync(`${stem}.lama-source.v8cache`)).toBe(false);
  });
});
