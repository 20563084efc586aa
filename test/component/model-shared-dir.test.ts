// Issue 33 item 9: "stage each revision once" compares resolved commits, not spellings.
// sparkform:model pinned to a sha and a staged model at `main` (the same commit) would own one
// directory `<modelsDir>/<repo>/<commit>` on a shared node through two stages, and an update
// that drops a file from one would remove it from under the other: refused at preview, naming
// both keys and the fix. The pure check (components/model/dir-claims.ts), and SparkCluster
// under Pulumi's mocks with each model resolved against a real test endpoint on loopback.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelDirClaims, sharedDirProblem } from "../../components/model/dir-claims";
import { PAIR_CONFIG } from "../support/mock-pair";
import { setPulumiMocks } from "../support/pulumi-mocks";
import {
  publishTestModel,
  startHfEndpoint,
  type HfEndpoint,
  type PublishedFile,
  type PublishedRepo,
} from "../../sim/hub";

const C = "c".repeat(40);
const claim = (key: string, over: object = {}) => ({
  key,
  repo: "org/m",
  revision: C,
  commit: C,
  dir: `~/models/org/m/${C}`,
  nodes: ["spark-1", "spark-2"],
  ...over,
});

describe("sharedDirProblem", () => {
  it("a pinned sha and a branch resolving to it share the directory on the common nodes", () => {
    expect(
      sharedDirProblem(
        claim("models.b", { revision: "main" }),
        claim("model", { nodes: ["spark-2"] }),
      ),
    ).toBe(
      `sparkform:model (org/m at ${C}) and sparkform:models.b (org/m at main) both resolve to ` +
        `commit ${C}: both would own ~/models/org/m/${C} on spark-2, and a file dropped from one ` +
        "would be removed from under the other. Stage each commit once: remove sparkform:models.b " +
        "(sparkform:model stages it; leave sparkform:server.model unset to serve it)",
    );
  });

  it("two staged models: remove one, select the other", () => {
    expect(sharedDirProblem(claim("models.d"), claim("models.c", { revision: "v1" }))).toContain(
      "Stage each commit once: remove one of sparkform:models.c and sparkform:models.d, and " +
        "select the other with sparkform:server.model",
    );
  });

  it.each([
    ["another commit", { commit: "d".repeat(40), dir: `~/models/org/m/${"d".repeat(40)}` }],
    ["another modelsDir", { dir: `~/other/org/m/${C}` }],
    ["no node in common", { nodes: ["spark-3"] }],
  ])("%s: nothing shared", (_what, over) => {
    expect(sharedDirProblem(claim("model"), claim("models.b", over))).toBeUndefined();
  });

  it("ModelDirClaims refuses the second claim on one directory, whatever order", () => {
    const claims = new ModelDirClaims();
    claims.claim(claim("models.b", { revision: "main" }));
    expect(() => claims.claim(claim("model"))).toThrow(
      /sparkform:model \(org\/m at c+\) and sparkform:models\.b/,
    );
    expect(() =>
      claims.claim(claim("models.e", { commit: "e".repeat(40), dir: "x" })),
    ).not.toThrow();
  });
});

type Pub = PublishedRepo & { model: PublishedFile };
let tmp: string;
let hub: HfEndpoint;
let pub: Pub;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-shared-dir-"));
  pub = publishTestModel(path.join(tmp, "hub"));
  hub = await startHfEndpoint({ root: path.join(tmp, "hub") });
  process.env.XDG_CACHE_HOME = path.join(tmp, "xdg");
  await setPulumiMocks({ stack: "shared-dir", preview: true, measured: () => ({ nodeFiles: [] }) });
});
afterAll(async () => {
  await hub?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const settle = <T>(o: pulumi.Output<T>) =>
  (o as unknown as { promise(): Promise<T> }).promise().then(
    () => undefined,
    (err: unknown) => (err as Error).message,
  );

/**
 * Run `body` with the process's unhandled rejections collected instead of failing the run: a
 * refused model fails its replicas' registration, which Pulumi's runtime reports as unhandled
 * (what fails `pulumi preview`). Returns their messages.
 */
async function rejections(body: () => Promise<void>): Promise<string[]> {
  const saved = process.listeners("unhandledRejection");
  const seen: string[] = [];
  process.removeAllListeners("unhandledRejection");
  process.on("unhandledRejection", (e) => seen.push(e instanceof Error ? e.message : String(e)));
  try {
    await body();
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    process.removeAllListeners("unhandledRejection");
    for (const l of saved) process.on("unhandledRejection", l);
  }
  return seen;
}

async function cluster(name: string, b: object) {
  const { SparkCluster } = await import("../../components/cluster");
  const { parseStackConfig } = await import("../../components/stack-config");
  const model = {
    repo: pub.repo,
    revision: pub.commit,
    files: [pub.model.path],
    endpoint: hub.url,
  };
  const config = parseStackConfig({
    nodes: PAIR_CONFIG.nodes,
    model,
    models: { b: { ...model, ...b } },
  });
  return new SparkCluster(name, { config, projectDir: tmp });
}

describe("SparkCluster: one directory, one stage", () => {
  it("sparkform:model at a sha and a staged model at `main` (the same commit) are refused", async () => {
    let failed: Array<string | undefined> = [];
    const unhandled = await rejections(async () => {
      const c = await cluster("s1", { revision: "main", allowBranch: true });
      failed = await Promise.all([settle(c.model!.commit), settle(c.staged.b!.commit)]);
    });
    const refusal =
      `sparkform:model (${pub.repo} at ${pub.commit}) and sparkform:models.b (${pub.repo} at main) ` +
      `both resolve to commit ${pub.commit}: both would own ~/models/${pub.repo}/${pub.commit} ` +
      "on spark-1, spark-2";
    // One of the two (whichever resolved second) is refused, naming both.
    expect(failed.filter((m) => m !== undefined)).toEqual([expect.stringContaining(refusal)]);
    // What fails the preview: that refusal, from the replicas that could not register.
    expect(unhandled.length).toBeGreaterThan(0);
    for (const u of unhandled) expect(u).toContain(refusal);
  });

  it("the same commit under another modelsDir, or on other nodes, is another directory", async () => {
    const c = await cluster("s2", { revision: "main", allowBranch: true, modelsDir: "~/models-b" });
    expect(await settle(c.staged.b!.commit)).toBeUndefined();
    const { SparkCluster } = await import("../../components/cluster");
    const { parseStackConfig } = await import("../../components/stack-config");
    const model = {
      repo: pub.repo,
      revision: pub.commit,
      files: [pub.model.path],
      endpoint: hub.url,
    };
    const apart = new SparkCluster("s3", {
      config: parseStackConfig({
        nodes: PAIR_CONFIG.nodes,
        model: { ...model, nodes: ["spark-1"] },
        models: { b: { ...model, revision: "main", allowBranch: true, nodes: ["spark-2"] } },
      }),
      projectDir: tmp,
    });
    expect(
      await Promise.all([settle(apart.model!.commit), settle(apart.staged.b!.commit)]),
    ).toEqual([undefined, undefined]);
  });
});
