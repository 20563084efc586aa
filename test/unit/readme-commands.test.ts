// The README as a test (issue 21): every command in its shell code blocks, and the `try` line
// of the summary it shows, is run verbatim by a test (the user's-day journey, the acceptance
// suite, an e2e file) or listed here with the reason it cannot run on this machine. A command
// added to the README without either fails this test, so a README command that stops working
// fails CI in the test that runs it.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";

const repo = path.join(__dirname, "..", "..");
const README = readFileSync(path.join(repo, "README.md"), "utf8");
/** The summary's `try` line as the README shows it. */
const TRY = /^try\s+(.+)$/m.exec(README)?.[1] ?? "";

/** Commands that no test here can run, each with why. */
const NOT_HERE: Record<string, string> = {
  [TRY]:
    "the journey runs the `try` line `sparkform status` prints, after checking that it is this one",
  "sparkform sync [--stack S]": "usage form; `sparkform sync --stack local` runs in the journey",
  "sparkform run spark-1 [--stack S] -- mix test":
    "usage form on a real Spark's Elixir tree; `run spark-2 --stack local -- …` runs in the journey",
  "sparkform run spark-1 --big-cores --env MIX_ENV=bench -- mix run bench.exs":
    "real Sparks only: the simulated nodes' fact sheets list no performance cores (cli-run.test.ts checks the refusal)",
  "sparkform run spark-2 --print -- make": "prints only; cli-run.test.ts checks what it prints",
  "sparkform worker stop spark-2":
    "needs the selected stack; the journey runs worker commands with --stack local",
  "sparkform worker restart spark-2 --tcp":
    "an A/B on real Sparks' RDMA fabric (the simulated one is TCP already)",
  "sparkform worker restart spark-2 --no-debug --no-cache --threads 10 [--port N]":
    "usage form; worker-cli.test.ts checks how each flag starts the worker",
  "sparkform worker status spark-2": "needs the selected stack; rpc-worker e2e runs status",
  "sparkform worker rss spark-2": "needs the selected stack; rpc-worker e2e runs rss",
  "sparkform worker logs spark-2 200 | grep -E 'RDMA|transport'":
    "needs the selected stack and a real fabric's RDMA lines; rpc-worker e2e runs logs",
  "sparkform report fabric [--stack S]":
    "usage form; `npm run local` runs `report fabric --stack local`",
  "sparkform check nccl-log job.log":
    "needs an NCCL job's log; fabric-logs.test.ts runs it on fixtures",
  "sparkform status [--stack S]":
    "usage form; `sparkform status --stack local` runs in the journey",
  "sparkform doctor [--stack S]":
    "usage form; doctor.test.ts (e2e) runs doctor on a simulated pair",
  "sparkform drift --stack local":
    "needs the simulated pair's local stack (the e2e on the pair runs it); drift-lock.test.ts runs the same check on a throwaway stack",
  "sparkform drift --stack local --json":
    "needs the simulated pair's local stack; drift-preview.test.ts checks the object on a real preview",
  "sparkform drift --stack local --metrics-dir /var/lib/prometheus/node-exporter":
    "needs the local stack and node_exporter's directory; drift-metrics.test.ts writes and reads the textfile",
  "sparkform drift --stack local --metrics-dir /var/lib/prometheus/node-exporter --install --interval 5m":
    "installs into this host's systemd user manager; drift-timer.test.ts installs the same files in a temp HOME",
  "sparkform drift --stack local --repair safe":
    "repairs the simulated pair's local stack (the e2e on the pair runs it); drift-repair.test.ts checks the safe set and the targeted up",
  "export TEAM_URL='postgres://alice@db.lab:5432/sparkform?sslmode=verify-full'":
    "a team's server; the journey's team steps set TEAM_URL to a PostgreSQL of their own",
  "export TEAM_PASSPHRASE=~/.config/sparkform/team-passphrase":
    "the operator's secret store; the journey's team steps set TEAM_PASSPHRASE to a 0600 copy",
  "npm ci && npm run setup && npm test":
    "README command 2: .ci/run runs exactly it on a clean clone",
  "npm ci && npm run setup && npm run local":
    "README command 1: its installs cannot run inside the test run (npm ci replaces the running vitest); .ci/run installs, and the journey runs `npm run local`",
};

/** Each command of the README's sh blocks (comments cut), and the summary's `try` line. */
export function readmeCommands(text: string): string[] {
  const out: string[] = [];
  const blocks = text.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm);
  for (const [, lang, body] of blocks) {
    for (const raw of (body ?? "").split("\n")) {
      if (lang === "text") {
        const t = /^try\s+(.+)$/.exec(raw.trim());
        if (t) out.push(t[1] as string);
        continue;
      }
      if (lang !== "sh") continue;
      const line = raw.replace(/\s+#\s.*$/, "").trim();
      if (line && !line.startsWith("#")) out.push(line);
    }
  }
  return out;
}

const tests = execFileSync(
  "git",
  ["ls-files", "--cached", "--others", "--exclude-standard", "test"],
  {
    cwd: repo,
    encoding: "utf8",
  },
)
  .split("\n")
  .filter((f) => f.endsWith(".ts") && !f.endsWith("readme-commands.test.ts"))
  .map((f) => readFileSync(path.join(repo, f), "utf8"));

describe("every README command", () => {
  const commands = readmeCommands(README);

  it("is found in the README's code blocks", () => {
    expect(commands).toContain("npm ci && npm run setup && npm run local");
    expect(commands.length).toBeGreaterThan(15);
  });

  it.each(commands)("%s: is run by a test, or listed with why it cannot run here", (cmd) => {
    const ran = tests.some((t) => t.includes(JSON.stringify(cmd).slice(1, -1)) || t.includes(cmd));
    expect(ran || cmd in NOT_HERE, `no test runs \`${cmd}\`, and NOT_HERE gives no reason`).toBe(
      true,
    );
  });

  it("lists no command the README no longer has", () => {
    expect(Object.keys(NOT_HERE).filter((c) => !commands.includes(c))).toEqual([]);
  });
});
