// The README's "Team" section walked on the journey's own pair (issue 36): the `local` stack that
// `npm run local` made moved to a real PostgreSQL (test/support/postgres.ts), a second checkout
// of this repository (a clone beside it, the stack's config file copied as `git pull` would)
// logged in with the team's passphrase, an edit synced and a model swapped from there, the first
// checkout's `status` showing it, two `up`s at once, and an `up` SIGKILLed mid-build brought back
// by the documented recovery. The journey (journey.test.ts) calls these in order, with traffic in
// between, after its own steps; `restore()` moves the stack back to the checkout's own state.
import { execa } from "execa";
import {
  appendFileSync,
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "vitest";
import { backendLocks, judgedLocks } from "../../cli/drift/lock";
import { repoRoot } from "../../setup/pulumi/env";
import { publishStagedTestModel } from "../../sim/hub/repo";
import { readState } from "../../stack-state";
import { startPostgres, type Postgres } from "../support/postgres";
import { asUser } from "../support/sim-node";

type Readme = (cmd: string, o?: { expectFailure?: boolean; cwd?: string }) => Promise<string>;

export interface TeamContext {
  /** A README command run as the user types it, in `cwd` (default: the checkout). */
  readonly readme: Readme;
  /** One request of each kind through the endpoint. */
  readonly traffic: () => Promise<unknown>;
  readonly log: (line: string) => void;
}

const STACK = "local";
const MARK_B = "// edited in the second checkout";
/** A compiled file of the worker's target: an edit rebuilds ggml-rpc-server. */
const RPC_SOURCE = path.join("tools", "rpc", "rpc-server.cpp");

export function teamSteps(ctx: TeamContext) {
  const work = mkdtempSync(path.join(os.tmpdir(), "journey-team-"));
  const checkoutB = path.join(work, "checkout-b");
  const passphrase = path.join(work, "team-passphrase");
  const saved: Record<string, string | undefined> = {};
  let pg: Postgres | undefined;
  let moved = false;
  let rpcBefore: string | undefined;
  let configBefore: string | undefined;
  const configFile = path.join(repoRoot, "stacks", "Pulumi.local.yaml");
  const rpcSource = path.join(repoRoot, ".sparkform", "llama.cpp", RPC_SOURCE);

  const inB = (cmd: string, o: { expectFailure?: boolean } = {}) =>
    ctx.readme(cmd, { ...o, cwd: checkoutB });

  /** The stack's export, each resource's URN with how often it is there. */
  async function urnCounts(): Promise<Map<string, number>> {
    const out = await ctx.readme(`npm run pulumi -- stack export -s ${STACK}`);
    const counts = new Map<string, number>();
    for (const r of readState(out.slice(out.indexOf("{")), STACK).resources)
      counts.set(r.urn, (counts.get(r.urn) ?? 0) + 1);
    return counts;
  }

  const locks = () => backendLocks(pg!.backend, "sparkform", STACK);

  /** Sets the operator's environment: the server's URL, its password file, the passphrase. */
  function operatorEnv(vars: Record<string, string>): void {
    for (const [k, v] of Object.entries(vars)) {
      if (!(k in saved)) saved[k] = process.env[k];
      process.env[k] = v;
    }
  }

  return {
    async moveToPostgres(): Promise<void> {
      pg = await startPostgres({ dir: path.join(work, "pg") });
      // The team's passphrase, from the operator's own secret store: here, a 0600 copy.
      copyFileSync(path.join(repoRoot, ".sparkform", "passphrase"), passphrase);
      chmodSync(passphrase, 0o600);
      operatorEnv({
        TEAM_URL: pg.url,
        TEAM_PASSPHRASE: passphrase,
        PGPASSFILE: pg.pgpassFile,
      });
      const before = await urnCounts();
      const out = await ctx.readme(
        'sparkform team move "$TEAM_URL" --stack local --passphrase-file "$TEAM_PASSPHRASE"',
      );
      moved = true;
      expect(out).toMatch(
        new RegExp(`local on postgres://\\S+: the same ${before.size} resources`),
      );
      expect(await urnCounts()).toEqual(before);
      // The state is the server's row now; this checkout's file has none.
      expect(
        existsSync(
          path.join(
            repoRoot,
            ".sparkform",
            "backend",
            ".pulumi",
            "stacks",
            "sparkform",
            "local.json",
          ),
        ),
      ).toBe(false);
      const preview = await ctx.readme("npm run pulumi -- preview -s local --expect-no-changes");
      expect(preview).not.toMatch(/replace/);
      await ctx.traffic();
      for (let i = 0; i < 3; i++) {
        await ctx.readme(
          "npm run pulumi -- refresh -s local --yes --skip-preview --expect-no-changes",
        );
        await ctx.traffic();
      }
      expect(await ctx.readme("sparkform team --stack local")).toContain(`backend ${pg.url}`);
    },

    async secondCheckout(): Promise<void> {
      // A second operator's checkout: the repository, the stack's config file (committed in a
      // team's repository; generated by `sim up` here), the toolchain setup recorded, the tree.
      await execa("git", ["clone", "-q", "--shared", repoRoot, checkoutB]);
      symlinkSync(path.join(repoRoot, "node_modules"), path.join(checkoutB, "node_modules"));
      mkdirSync(path.join(checkoutB, ".sparkform"));
      copyFileSync(
        path.join(repoRoot, ".sparkform", "toolchain.env"),
        path.join(checkoutB, ".sparkform", "toolchain.env"),
      );
      copyFileSync(
        path.join(repoRoot, "stacks", "Pulumi.local.yaml"),
        path.join(checkoutB, "stacks", "Pulumi.local.yaml"),
      );
      await execa("cp", [
        "-a",
        path.join(repoRoot, ".sparkform", "llama.cpp"),
        path.join(checkoutB, ".sparkform", "llama.cpp"),
      ]);
      await inB(
        'sparkform team login "$TEAM_URL" --stack local --passphrase-file "$TEAM_PASSPHRASE"',
      );
      await inB("npm run pulumi -- preview -s local --expect-no-changes");

      // An edit synced and run from the second checkout.
      appendFileSync(
        path.join(checkoutB, ".sparkform", "llama.cpp", "examples", "simple", "simple.cpp"),
        `${MARK_B}\n`,
      );
      await inB("sparkform sync --stack local");
      expect(
        await inB("sparkform run spark-2 --stack local -- tail -n 1 examples/simple/simple.cpp"),
      ).toContain(MARK_B);

      // A model swapped from the second checkout: b staged and served in one `up`.
      const b = publishStagedTestModel(path.join(work, "hub-b"));
      const endpoint = /endpoint: "([^"]+)"/.exec(
        readFileSync(path.join(checkoutB, "stacks", "Pulumi.local.yaml"), "utf8"),
      )?.[1];
      expect(endpoint).toBeDefined();
      for (const [key, value] of [
        ["models.b.repo", b.repo],
        ["models.b.revision", b.commit],
        ["models.b.files[0]", b.model.path],
        ["models.b.endpoint", endpoint!],
        ["server.model", "b"],
      ])
        await inB(`npm run pulumi -- config set --path sparkform:${key} ${value} -s local`);
      await inB("npm run pulumi -- up -s local --yes --policy-pack policies");

      // The first checkout sees the second's change: its status reads the server's state.
      const status = await ctx.readme("sparkform status --stack local");
      expect(status).toMatch(/model\s+models\.b live/);
      ctx.log(
        `checkout A's status after B's swap: ${/model\s+models\.b live[^\n]*/.exec(status)?.[0]}`,
      );
      // The stack's config file travels as a team's does (git pull): checkout A takes B's.
      configBefore = readFileSync(configFile, "utf8");
      copyFileSync(
        path.join(checkoutB, "stacks", "Pulumi.local.yaml"),
        path.join(repoRoot, "stacks", "Pulumi.local.yaml"),
      );
      await ctx.traffic();
      await ctx.readme(
        "npm run pulumi -- refresh -s local --yes --skip-preview --expect-no-changes",
      );
    },

    async twoUpsAtOnce(): Promise<void> {
      const first = ctx.readme("npm run pulumi -- up -s local --yes --refresh");
      const end = Date.now() + 60_000;
      while ((await locks()).length === 0) {
        if (Date.now() > end) throw new Error("the first up took no lock within 60 s");
        await new Promise((r) => setTimeout(r, 200));
      }
      const [holder] = await locks();
      const t = Date.now();
      const refused = await inB("npm run pulumi -- up -s local --yes", { expectFailure: true });
      const seconds = (Date.now() - t) / 1000;
      ctx.log(`checkout B's up refused in ${seconds.toFixed(1)} s`);
      expect(seconds).toBeLessThan(15);
      expect(refused).toMatch(/locked/);
      // pulumi's own line, then sparkform's verdict on the holder.
      expect(refused).toContain(`${holder!.user}@${holder!.host}`);
      expect(refused).toMatch(
        new RegExp(
          `the stack's lock holder:\\s+${holder!.user}@${holder!.host} \\(pid ${holder!.pid}\\) since \\S+: live,`,
        ),
      );
      await first;
      expect(await locks()).toEqual([]);
      expect([...(await urnCounts()).values()].every((n) => n === 1)).toBe(true);
      await ctx.traffic();
    },

    async killedUpRecovered(): Promise<void> {
      // An edit the worker's binary is built from: the next `up` rebuilds, then restarts the
      // worker on the new build.
      rpcBefore = readFileSync(rpcSource, "utf8");
      writeFileSync(rpcSource, rpcBefore.replace(/^/, "// journey: rebuilt, killed mid-build\n"));
      const up = execa("sh", ["-c", "npm run pulumi -- up -s local --yes"], {
        cwd: repoRoot,
        detached: true,
        all: true,
        reject: false,
      });
      let seen = "";
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no build started:\n${seen.slice(-3000)}`)),
          600_000,
        );
        up.all?.on("data", (d: Buffer) => {
          seen += d.toString();
          if (/configure done in/.test(seen)) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      // The control node dies: every process of the `up`, at once.
      process.kill(-up.pid!, "SIGKILL");
      await up;
      ctx.log(
        `up SIGKILLed mid-build: ${seen
          .split("\n")
          .filter((l) => /configure done/.test(l))[0]
          ?.trim()}`,
      );
      const left = await locks();
      expect(left).toHaveLength(1);
      // Before the recovery, the README's check that the holder is gone: stale, from this host
      // (its pid) and from any other (its session to the server ended).
      const shown = await ctx.readme("sparkform team --stack local");
      expect(shown).toMatch(/lock\s+stack local: \S+ \(pid \d+\) since \S+: stale, /);
      const [elsewhere] = await judgedLocks(pg!.backend, [left[0]!.file], { host: "another-host" });
      expect(elsewhere?.life.life).toBe("stale");
      ctx.log(`the killed up's lock, judged from another host: ${elsewhere?.life.why}`);

      await ctx.readme("npm run pulumi -- cancel -s local --yes");
      await ctx.readme("npm run pulumi -- refresh -s local --yes --clear-pending-creates");
      await ctx.readme("npm run pulumi -- up -s local --yes");

      // One worker on spark-2, one server on spark-1; every model file whole.
      // By process name: the RSS guard's command line names the server's unit too.
      const workers = await asUser("spark-2", "pgrep -c -x ggml-rpc-server || true");
      expect(workers).toBe("1");
      const servers = await asUser("spark-1", "pgrep -c -x llama-server || true");
      expect(servers).toBe("1");
      for (const node of ["spark-1", "spark-2"]) {
        const partial = await asUser(
          node,
          "find ~/models -name '*.tmp*' -o -name '*.part*' -o -name '*.incomplete' | head",
        );
        expect(partial).toBe("");
      }
      expect([...(await urnCounts()).values()].every((n) => n === 1)).toBe(true);
      await ctx.traffic();
      for (let i = 0; i < 2; i++)
        await ctx.readme(
          "npm run pulumi -- refresh -s local --yes --skip-preview --expect-no-changes",
        );
    },

    /** The checkout back on its own state, the environment as it was, the server stopped. */
    async restore(): Promise<void> {
      if (rpcBefore !== undefined) writeFileSync(rpcSource, rpcBefore);
      try {
        // The stack as this checkout's config has it again, while the pair is up: the swap's
        // staged model b leaves the nodes through its own resources' delete. Left in state, its
        // replicas would name this pair's addresses after `sim down`, and the next `npm run
        // local` (a new pair) could not delete them.
        if (configBefore !== undefined) {
          writeFileSync(configFile, configBefore);
          await ctx
            .readme("npm run pulumi -- up -s local --yes")
            .catch((e: Error) => ctx.log(`restoring the config's model: ${e.message}`));
        }
        if (moved)
          await ctx.readme(
            `sparkform team move file://${path.join(repoRoot, ".sparkform", "backend")} --stack local`,
          );
      } finally {
        for (const [k, v] of Object.entries(saved)) {
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
        }
        await pg?.stop();
        rmSync(work, { recursive: true, force: true });
      }
    },
  };
}
