// The programs in native/ as a node receives them: libraries inlined (from a checkout the same
// program sources them, and both must print the same), delivered on stdin with "$@" intact,
// and recorded in state as {name, sha256}. The text sent is the file in native/ byte for byte,
// with each library line given way to that library's text (test/support/as-sent.ts): a change to
// what runs on nodes is a change to a file in native/, which review reads as it is.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  allPrograms,
  LAUNCHERS,
  nativeProgram,
  programCommand,
  programFor,
  programPath,
  programRef,
  sameProgram,
  sha256Hex,
} from "../../components/native-script";
import { buildRemoteCommand } from "../../components/transport";
import { asSent, checkoutSkeleton, libraryAsInlined } from "../support/as-sent";

const ENV = { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" };

/** Run a command as remote-command.ts builds it, with the local sh standing in for sshd's. */
function runLocally(cmd: Parameters<typeof buildRemoteCommand>[0]) {
  const built = buildRemoteCommand(cmd);
  return spawnSync("/bin/sh", ["-c", built.commandLine], {
    encoding: "utf8",
    input: built.stdin ?? "",
    env: { ...ENV, HOME: process.env.HOME ?? "/", USER: "u", LOGNAME: "u" },
  });
}

describe("every program in native/", () => {
  const names = allPrograms();

  it("are the node programs of every stage", () => {
    expect(names).toEqual([
      "build/build.sh",
      "build/command-build.sh",
      "build/configure.sh",
      "build/delete.sh",
      "build/digest.sh",
      "build/fan-out-install.sh",
      "build/find-build-dir.sh",
      "build/install.sh",
      "build/toolchain-facts.sh",
      "build/verify-build.sh",
      "doctor/ports-and-files.py",
      "fabric/rail-rtt-throughput.py",
      "fabric/tcp-rtt.py",
      "model/model-fetch.py",
      "node/facts.sh",
      "router/files.sh",
      "router/roll.py",
      "rpc-worker/prewarm.py",
      "rpc-worker/prune.py",
      "rpc-worker/rpc-hello.py",
      "serving/smoke.py",
      "serving/stop-worker-clients.sh",
      "serving/worker-log.py",
      "transport/copy-from-peer.sh",
      "tree/prepare-dir.sh",
      "tree/remove-dir.sh",
      "tree/tree-digest.py",
      "unit/rss-guard.py",
      "unit/start.sh",
      "unit/status.py",
      "unit/stop.sh",
      "unit/units.py",
    ]);
  });

  for (const name of names) {
    it(`${name}: sent as the file in native/ with its libraries inlined, parses, sources nothing`, () => {
      const p = nativeProgram(name);
      const sent = asSent(name);
      expect(sent.skeleton).toBe(checkoutSkeleton(name));
      for (const { lib, body } of sent.inlined) expect(body, lib).toBe(libraryAsInlined(lib));
      expect(p.sha256).toBe(sha256Hex(p.text));
      expect(p.text).not.toMatch(/^\. /m);
      // The sh launcher passes the text as one argument (`sh -c "$p"`): Linux caps one at 128 KiB.
      expect(Buffer.byteLength(p.text)).toBeLessThan(100 * 1024);
      if (p.interpreter === "sh") execFileSync("/bin/sh", ["-n", "-c", p.text]);
      else
        execFileSync("python3", ["-c", "import sys; compile(sys.stdin.read(), 'p', 'exec')"], {
          input: p.text,
        });
    });
  }

  for (const [name, lib] of [
    ["node/facts.sh", "json.sh"],
    ["build/verify-build.sh", "json.sh"],
    ["build/build.sh", "ccache-stats.sh"],
    ["build/command-build.sh", "ccache-stats.sh"],
  ] as const) {
    it(`${name}: native/lib/${lib} is inlined`, () => {
      const text = nativeProgram(name).text;
      expect(text).toContain(`# ---- native/lib/${lib} (inlined) ----`);
      expect(text).toContain(
        readFileSync(programPath(name).replace(/[^/]+\/[^/]+$/, `lib/${lib}`), "utf8").trimEnd(),
      );
    });
  }

  for (const [name, libs] of [
    ["unit/status.py", ["nodefs.py", "nodenet.py"]],
    ["rpc-worker/prewarm.py", ["nodefs.py"]],
    ["serving/smoke.py", ["nodenet.py"]],
    ["serving/worker-log.py", ["nodenet.py"]],
  ] as const) {
    it(`${name}: native/lib/${libs.join(", ")} inlined in place of the import, no path line`, () => {
      const text = nativeProgram(name).text;
      for (const lib of libs) {
        expect(text).toContain(`# ---- native/lib/${lib} (inlined) ----`);
        expect(text).toContain(
          readFileSync(programPath(name).replace(/[^/]+\/[^/]+$/, `lib/${lib}`), "utf8").trimEnd(),
        );
        expect(text).not.toMatch(new RegExp(`^from ${lib.replace(".py", "")} import`, "m"));
      }
      expect(text).not.toContain("__file__");
    });
  }

  it("no Python program keeps its own copy of a library's helper", () => {
    for (const name of allPrograms().filter((n) => n.endsWith(".py") && !n.startsWith("model/")))
      expect(readFileSync(programPath(name), "utf8"), name).not.toMatch(
        /^def (sha256|last_lines|log_lines|dev_bytes|listening_inodes|sockets|listeners)\(/m,
      );
  });

  it("the unit programs, run from the checkout and as sent, print the same status shape", () => {
    const args = ["--unit", "u-1", "--guard-unit", "g-1", "--port", "1", "--bin", "/nonexistent"];
    const more = ["--state", "/nonexistent", "--log", "x", "--health", "127.0.0.1"];
    const keys = (out: string) => Object.keys(JSON.parse(out) as object).sort();
    const local = execFileSync("python3", [programPath("unit/status.py"), ...args, ...more], {
      encoding: "utf8",
    });
    const sent = execFileSync("python3", ["-", ...args, ...more], {
      input: nativeProgram("unit/status.py").text,
      encoding: "utf8",
    });
    expect(keys(sent)).toEqual(keys(local));
    expect(keys(sent)).toContain("health");
  });

  it("the inlined and the sourced facts.sh print the same fact sheet shape", () => {
    const keys = (out: string) => Object.keys(JSON.parse(out) as object).sort();
    const sent = execFileSync(
      "/bin/sh",
      ["-c", nativeProgram("node/facts.sh").text, "facts.sh", "/tmp"],
      {
        encoding: "utf8",
        env: ENV,
      },
    );
    const fromCheckout = execFileSync("/bin/sh", [programPath("node/facts.sh"), "/tmp"], {
      encoding: "utf8",
      env: ENV,
    });
    expect(keys(sent)).toEqual(keys(fromCheckout));
    expect(JSON.parse(sent).hostname).toBe(JSON.parse(fromCheckout).hostname);
  });

  it("names are <stage>/<file>.sh|.py under native/, never a library or a path out of it", () => {
    for (const bad of [
      "facts.sh",
      "lib/json.sh",
      "../native/node/facts.sh",
      "node/../x.sh",
      "node/x.rb",
    ]) {
      expect(() => programPath(bad)).toThrow(/is not <stage>\/<name>\.sh or \.py under native\//);
    }
    expect(() => nativeProgram("node/no-such.sh")).toThrow(
      /native program node\/no-such\.sh is not in this checkout/,
    );
  });
});

describe('delivery: the program on stdin, its arguments as "$@"', () => {
  it("sh: arguments arrive verbatim, and what the program runs cannot read its text", () => {
    const r = runLocally(
      programCommand("build/build.sh", {
        args: [
          "sh",
          "-c",
          'printf "<%s>" "$@"; echo; cat; echo "[stdin ended]"',
          "x",
          "a b",
          "'q'",
          "$HOME",
        ],
      }),
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.split("\n").slice(0, 3)).toEqual([
      "<a b><'q'><$HOME>",
      "[stdin ended]",
      "==> ccache statistics",
    ]);
  });

  it("sh: a secret the transport sends on stdin comes first and still reaches the program", () => {
    const r = runLocally(
      programCommand("build/build.sh", {
        args: ["sh", "-c", 'printf "token=%s\\n" "$TOKEN"'],
        env: { TOKEN: { secret: "s3cret" } },
      }),
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.split("\n")[0]).toBe("token=s3cret");
  });

  it("python3: the program runs with its arguments (tcp-rtt to a closed local port)", () => {
    const r = runLocally(programCommand("fabric/tcp-rtt.py", { args: ["127.0.0.1", "1", "3"] }));
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(out).toMatchObject({ addr: "127.0.0.1", port: 1, samples: 0, banner: "" });
    expect(out.error).toMatch(/^ConnectionRefusedError: /);
  });

  it("sh: an empty stdin is an error, not a silent success", () => {
    const r = spawnSync("/bin/sh", ["-c", LAUNCHERS.sh, "sparkform"], {
      encoding: "utf8",
      input: "",
    });
    expect([r.status, r.stderr.trim()]).toEqual([96, "sparkform: no program arrived on stdin"]);
  });

  it("the command names the program; the text travels only on stdin", () => {
    const cmd = programCommand("build/digest.sh", { args: ["/d", "bin/a"] });
    expect(cmd).toEqual({
      script: LAUNCHERS.sh,
      args: ["/d", "bin/a"],
      stdin: nativeProgram("build/digest.sh").text,
      display: "native/build/digest.sh /d bin/a",
    });
    expect(buildRemoteCommand(cmd).commandLine).not.toContain("sha256sum");
  });
});

describe("what state records: {name, sha256}", () => {
  const ref = programRef("node/facts.sh");
  const text = nativeProgram("node/facts.sh").text;

  it.each([
    ["the same ref", true, { ...ref }],
    ["the same program under another name", true, { name: "facts.sh", sha256: ref.sha256 }],
    ["a ref of other text", false, { name: ref.name, sha256: "0".repeat(64) }],
    ["the text itself (state written before refs)", true, text],
    ["other text", false, `${text}\n`],
    ["nothing", false, undefined],
    ["something else", false, { name: ref.name }],
  ])("sameProgram: %s → %s", (_what, same, recorded) => {
    expect(sameProgram(recorded, ref)).toBe(same);
  });

  it("sameProgram compares two records of either kind (refresh diffs old state against old inputs)", () => {
    expect(sameProgram(text, text)).toBe(true);
    expect(sameProgram(text, ref)).toBe(true);
    expect(sameProgram(ref, text)).toBe(true);
    expect(sameProgram(text, `${text} `)).toBe(false);
    expect(sameProgram(undefined, undefined)).toBe(false);
    expect(sameProgram(ref, undefined)).toBe(false);
  });

  it("programFor loads by the recorded name, or the fallback when state holds text", () => {
    expect(programFor({ name: "tree/tree-digest.py", sha256: "x" }, "node/facts.sh").name).toBe(
      "tree/tree-digest.py",
    );
    // A program moved since state recorded it (the worker's start.sh, now the unit's): the
    // role's program now, for which the caller builds the arguments.
    expect(programFor({ name: "rpc-worker/start.sh", sha256: "x" }, "unit/start.sh").name).toBe(
      "unit/start.sh",
    );
    expect(programFor(text, "node/facts.sh")).toBe(nativeProgram("node/facts.sh"));
    expect(programFor(undefined, "node/facts.sh").text).toBe(text);
  });
});

describe("state written by the previous main (the program's whole text) converges", () => {
  const target = {
    name: "spark-1",
    host: "h",
    port: 22,
    user: "spark",
    hostKey: "ssh-ed25519 AAAA",
  };
  const facts = programRef("node/facts.sh");
  const digest = programRef("tree/tree-digest.py");

  it("SparkNode: factsScript text equal to the program is no change; other text is", async () => {
    const { diff } = await import("../../components/node/provider");
    const news = {
      kind: "SparkNode" as const,
      providerVersion: "1",
      target,
      factsProgram: facts,
      diskPaths: ["~"],
    };
    const { factsProgram: _f, ...rest } = news;
    const old = (factsScript: string) => ({ ...rest, factsScript, facts: {} }) as never;
    expect(await diff("id", old(nativeProgram(facts.name).text), news)).toEqual({
      changes: false,
      replaces: [],
    });
    expect((await diff("id", old("#!/bin/sh\n"), news)).changes).toBe(true);
    expect((await diff("id", { ...news, facts: {} } as never, news)).changes).toBe(false);
    // refresh: the old state against the old inputs recorded with it
    const legacy = old(nativeProgram(facts.name).text);
    expect((await diff("id", legacy, legacy)).changes).toBe(false);
  });

  it("TreeSync: digestScript text equal to the program is no change; other text is", async () => {
    const { diff } = await import("../../components/tree/provider");
    const news = {
      kind: "TreeSync" as const,
      providerVersion: "1",
      target,
      source: "/src",
      dest: "~/src/t",
      exclude: [],
      expectedDigest: "d",
      digestProgram: digest,
    };
    const { digestProgram: _d, ...rest } = news;
    const old = (digestScript: string) =>
      ({ ...rest, digestScript, digest: "d", files: 1, bytes: 1 }) as never;
    expect((await diff("id", old(nativeProgram(digest.name).text), news)).changes).toBe(false);
    const legacy = old(nativeProgram(digest.name).text);
    expect((await diff("id", legacy, legacy)).changes).toBe(false); // refresh
    expect((await diff("id", old("print()\n"), news)).changes).toBe(true);
  });

  it("Toolchain: digestScript text equal to the program is no change; other text is", async () => {
    const { diff } = await import("../../components/toolchain/provider");
    const news = {
      kind: "Toolchain" as const,
      providerVersion: "1",
      target,
      path: "~/.asdf",
      binDirs: ["bin"],
      probe: ["elixir", "--version"],
      expect: "Elixir",
      digestProgram: digest,
    };
    const { digestProgram: _d, ...rest } = news;
    const old = (digestScript: string) =>
      ({
        ...rest,
        digestScript,
        digest: "d",
        files: 1,
        bytes: 1,
        probeOutput: "",
        copiedBy: "present",
      }) as never;
    expect((await diff("id", old(nativeProgram(digest.name).text), news)).changes).toBe(false);
    const legacy = old(nativeProgram(digest.name).text);
    expect((await diff("id", legacy, legacy)).changes).toBe(false); // refresh
    expect((await diff("id", old("print()\n"), news)).changes).toBe(true);
  });
});

describe("transport/copy-from-peer.sh (the preamble of node-to-node copies)", () => {
  it("leaves RSH, DST, SRC and the body's args, and removes the pinned known_hosts file however the body ends", () => {
    const home = mkdtempSync(path.join(tmpdir(), "sparkform-peer-"));
    try {
      for (const [body, status] of [
        ['printf "%s|%s|%s|%s\\n" "$RSH" "$DST" "$SRC" "$*"; cat "$KNOWN_HOSTS"; echo', 0],
        ["false", 1],
      ] as const) {
        const kh = ".cache/sparkform/known_hosts.spark-2.abc";
        const r = spawnSync(
          "/bin/sh",
          [
            "-c",
            `${nativeProgram("transport/copy-from-peer.sh").text}${body}`,
            "sparkform",
            "[h]:22 ssh-ed25519 AAAA",
            kh,
            "ssh -o X=1",
            "dest dir",
            "spark@10.0.0.2:src",
            "a b",
          ],
          { encoding: "utf8", cwd: home },
        );
        expect(r.status, r.stderr).toBe(status);
        if (status === 0) {
          expect(r.stdout).toBe(
            "ssh -o X=1|dest dir|spark@10.0.0.2:src|a b\n[h]:22 ssh-ed25519 AAAA\n",
          );
        }
        expect(existsSync(path.join(home, "dest dir"))).toBe(true);
        expect(readdirSync(path.join(home, ".cache/sparkform"))).toEqual([]);
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
