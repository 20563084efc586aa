// The `sparkform` launcher that `npm run setup` puts on PATH (setup/install-launcher.sh, issue 32
// item 4): it runs the CLI of the sparkform checkout around the current directory, else of the
// checkout that installed it, passes every argument through as it is, leaves a `sparkform` that
// is not its own alone, and a second install changes nothing.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const installer = path.join(__dirname, "..", "..", "setup", "install-launcher.sh");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-on-path-"));
const binDir = path.join(tmp, "bin dir");
const launcher = path.join(binDir, "sparkform");

// A checkout as far as the launcher cares: a package.json named sparkform and a bin/sparkform.js
// that says which file ran and with which arguments.
function checkout(dir: string, name = "sparkform"): string {
  fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name }, null, 2) + "\n");
  fs.writeFileSync(
    path.join(dir, "bin", "sparkform.js"),
    "console.log(JSON.stringify({ script: __filename, args: process.argv.slice(2) }));\n",
  );
  return dir;
}
const installing = checkout(path.join(tmp, "installing 'clone'"));
const other = checkout(path.join(tmp, "other-clone"));
const unrelated = path.join(tmp, "elsewhere", "deeper");

const env = { ...process.env, PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` };
const install = (dir = binDir) =>
  spawnSync("sh", [installer, dir, installing], { encoding: "utf8", env });
const runIn = (cwd: string, args: string[]) => {
  const r = spawnSync(launcher, args, { cwd, encoding: "utf8", env });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  return JSON.parse(r.stdout) as { script: string; args: string[] };
};
const args = ["run", "spark-1", "--", "echo", "two  spaces", "", "it's", '"q"', "$HOME", "*"];

describe("the sparkform launcher", () => {
  let first: ReturnType<typeof install>;
  beforeAll(() => {
    fs.mkdirSync(unrelated, { recursive: true });
    // A package.json of another name on the way up is passed over.
    checkout(path.join(other, "policies"), "sparkform-policies");
    first = install();
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it("is installed as a POSIX sh script with its marker, saying so and where PATH lacks its folder", () => {
    expect(first.status).toBe(0);
    expect(first.stderr).toBe("");
    expect(first.stdout).toBe(
      `setup: sparkform launcher installed: ${launcher} (runs the checkout you are in, else ${installing})\n` +
        `setup: warning: ${binDir} is not on PATH; add this line to ~/.profile (or your shell's rc file), ` +
        `then open a new shell: export PATH="${binDir}:$PATH"\n`,
    );
    const text = fs.readFileSync(launcher, "utf8");
    expect(text.split("\n").slice(0, 2)).toEqual([
      "#!/bin/sh",
      "# sparkform-launcher: written by npm run setup (setup/install-launcher.sh); it may replace this file",
    ]);
    expect(fs.statSync(launcher).mode & 0o777).toBe(0o755);
    expect(fs.readdirSync(binDir)).toEqual(["sparkform"]);
  });

  it("names the ~/.local/bin line to add as the user would write it", () => {
    const home = path.join(tmp, "home");
    const r = spawnSync("sh", [installer, path.join(home, ".local", "bin"), installing], {
      encoding: "utf8",
      env: { ...env, HOME: home },
    });
    expect(r.status).toBe(0);
    expect(r.stdout.split("\n")[1]).toBe(
      `setup: warning: ${home}/.local/bin is not on PATH; add this line to ~/.profile ` +
        `(or your shell's rc file), then open a new shell: export PATH="$HOME/.local/bin:$PATH"`,
    );
  });

  it("runs the checkout the user is in, from its root or any folder below it", () => {
    expect(runIn(other, args)).toEqual({ script: path.join(other, "bin", "sparkform.js"), args });
    expect(runIn(path.join(other, "policies", "bin"), ["--help"])).toEqual({
      script: path.join(other, "bin", "sparkform.js"),
      args: ["--help"],
    });
  });

  it("runs the installing checkout from a folder outside any checkout", () => {
    expect(runIn(unrelated, args)).toEqual({
      script: path.join(installing, "bin", "sparkform.js"),
      args,
    });
    expect(runIn(unrelated, [])).toEqual({
      script: path.join(installing, "bin", "sparkform.js"),
      args: [],
    });
  });

  it("changes nothing on a second install and says so in one line", () => {
    const before = fs.statSync(launcher);
    const again = spawnSync("sh", [installer, binDir, installing], {
      encoding: "utf8",
      env: { ...env, PATH: `${binDir}:${env.PATH}` },
    });
    expect(again.status).toBe(0);
    expect(again.stdout).toBe(`setup: sparkform launcher ${launcher} unchanged\n`);
    const after = fs.statSync(launcher);
    expect([after.ino, after.mtimeMs]).toEqual([before.ino, before.mtimeMs]);
    expect(fs.readdirSync(binDir)).toEqual(["sparkform"]);
  });

  it("leaves a sparkform that is not its own alone, file or link", () => {
    const foreignDir = path.join(tmp, "foreign");
    fs.mkdirSync(foreignDir);
    const foreign = path.join(foreignDir, "sparkform");
    const text = "#!/bin/sh\necho someone else's sparkform\n";
    fs.writeFileSync(foreign, text, { mode: 0o755 });
    const r = install(foreignDir);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(
      `setup: warning: ${foreign} is not sparkform's launcher; left as it is (\`node bin/sparkform.js\` runs the CLI)\n`,
    );
    expect(fs.readFileSync(foreign, "utf8")).toBe(text);
    expect(fs.readdirSync(foreignDir)).toEqual(["sparkform"]);

    const linkDir = path.join(tmp, "link");
    fs.mkdirSync(linkDir);
    fs.symlinkSync(path.join(other, "bin", "sparkform.js"), path.join(linkDir, "sparkform"));
    expect(install(linkDir).stdout).toMatch(/is not sparkform's launcher; left as it is/);
    expect(fs.readlinkSync(path.join(linkDir, "sparkform"))).toBe(
      path.join(other, "bin", "sparkform.js"),
    );
  });
});
