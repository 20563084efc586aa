// `sparkform drift`'s argument handling, through the command's own run(): the README's
// `--uninstall` line run as written (in a temporary HOME, with no user manager reachable), and
// the usage errors, each naming the flag and the fix (exit 2 through errors.ts).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { run } from "../../cli/commands/drift";
import { printError, UsageError } from "../../cli/errors";

const README_UNINSTALL = "sparkform drift --stack local --uninstall";
const saved = { ...process.env };
const home = fs.mkdtempSync(path.join(os.tmpdir(), "drift-cli-"));

beforeAll(() => {
  process.env.HOME = home;
  delete process.env.XDG_CONFIG_HOME;
  // No user manager: nothing here may reach this host's own.
  delete process.env.XDG_RUNTIME_DIR;
  delete process.env.DBUS_SESSION_BUS_ADDRESS;
});
afterAll(() => {
  process.env = saved;
  fs.rmSync(home, { recursive: true, force: true });
});

describe("sparkform drift's arguments", () => {
  it(`\`${README_UNINSTALL}\` with nothing installed says so and removes nothing`, async () => {
    const printed: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((s) => {
      printed.push(String(s));
      return true;
    });
    try {
      expect(await run(README_UNINSTALL.split(" ").slice(2))).toBe(0);
    } finally {
      spy.mockRestore();
    }
    expect(printed.join("")).toBe(
      "nothing to remove: no timer of stack local was installed by `sparkform drift --install`\n",
    );
    expect(fs.readdirSync(home)).toEqual([]);
  });

  it.each([
    [["--install", "--uninstall"], /give --install or --uninstall, not both/],
    [["--interval", "5m"], /--interval goes with --install/],
    [["--install"], /--install needs --metrics-dir DIR/],
    [
      ["--metrics-dir", "/nonexistent/dir"],
      /--metrics-dir \/nonexistent\/dir is not a directory: create it/,
    ],
    [
      ["--install", "--metrics-dir", home, "--interval", "7m"],
      /--interval "7m" is not an interval/,
    ],
  ])("%j is a usage error (exit 2) naming the flag and the fix", async (argv, message) => {
    const err = await run(["--stack", "local", ...argv]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toMatch(message);
    const spy = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      expect(printError("drift", err)).toBe(2);
    } finally {
      spy.mockRestore();
    }
  });
});
