// Issue 33 item 10: sparkform:hfToken goes to a model only when its endpoint has the origin the
// token was given for (sparkform:model.endpoint, by default the public hub), or when that model
// opts in with `sendToken: true`. SparkCluster under Pulumi's mocks, each model resolved
// against a real test endpoint on loopback (sim/hub): the main model's endpoint (`hub`) and a
// third-party mirror on another port (`mirror`, a different origin), each logging whether a
// request carried an Authorization header. What each ModelReplica would be given (its `token`
// input, the node's HF_TOKEN) is read from the registered inputs.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { PAIR_CONFIG, type Registered } from "../support/mock-pair";
import {
  publishTestModel,
  startHfEndpoint,
  type HfEndpoint,
  type PublishedFile,
  type PublishedRepo,
} from "../../sim/hub";

const TOKEN = "hf_wiring_token_for_the_hub_only_0123";
const registered: Registered[] = [];
let tmp: string;
let hub: HfEndpoint;
let mirror: HfEndpoint;
let gated: HfEndpoint;
type Pub = PublishedRepo & { model: PublishedFile };
let main: Pub;
const staged: Record<string, Pub> = {};

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-token-wiring-"));
  const root = path.join(tmp, "hub");
  main = publishTestModel(root);
  for (const name of ["mirrored", "optin", "samehub", "gated"])
    staged[name] = publishTestModel(root, { repo: `sparkform/tiny-${name}` });
  hub = await startHfEndpoint({ root });
  mirror = await startHfEndpoint({ root });
  // A mirror that wants a token: without the opt-in it answers 401.
  gated = await startHfEndpoint({ root, token: TOKEN });
  // Its own GGUF header cache: every resolve reads the header from its endpoint.
  process.env.XDG_CACHE_HOME = path.join(tmp, "xdg");
  await pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        registered.push({ type: args.type, name: args.name, inputs: args.inputs });
        return { id: `${args.name}-id`, state: { ...args.inputs, nodeFiles: [] } };
      },
      call: (args) => {
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    "sparkform",
    "token-wiring",
    true,
  );
});
afterAll(async () => {
  await hub?.close();
  await mirror?.close();
  await gated?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});
beforeEach(() => {
  registered.length = 0;
  for (const e of [hub, mirror, gated]) e.clearLog();
});

const pinned = (p: Pub, endpoint: string, extra: object = {}) => ({
  repo: p.repo,
  revision: p.commit,
  files: [p.model.path],
  endpoint,
  ...extra,
});

/** An Output's value, or its failure (Output.promise is the SDK's own way in). */
const settle = <T>(o: pulumi.Output<T>) =>
  (o as unknown as { promise(): Promise<T> }).promise().then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, message: (err as Error).message }),
  );

async function cluster(name: string, models: Record<string, object>) {
  const { SparkCluster } = await import("../../components/cluster");
  const { parseStackConfig } = await import("../../components/stack-config");
  const { nodes } = PAIR_CONFIG;
  const config = {
    ...parseStackConfig({ nodes, model: pinned(main, hub.url), models }),
    hfToken: pulumi.secret(TOKEN),
  };
  return new SparkCluster(name, { config, projectDir: tmp });
}

/** A registered input's value: the mocks see a secret as Pulumi's secret wrapper. */
const plain = (v: unknown): unknown =>
  v !== null && typeof v === "object" && "value" in v ? (v as { value: unknown }).value : v;
const tokens = (rs: Registered[]) => rs.map((r) => plain(r.inputs.token));

/**
 * Run `body` with the process's unhandled rejections collected instead of failing the run: a
 * model that fails to resolve fails its replicas' registration, which Pulumi's runtime reports
 * as unhandled (what fails `pulumi preview`). Returns their messages.
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

/** Every registered ModelReplica of `prefix` (`<stack>-model` or `<stack>-models-<name>`). */
const replicas = (prefix: string) =>
  registered.filter(
    (r) => r.type.endsWith(":ModelReplica") && r.name.startsWith(`${prefix}-spark-`),
  );

describe("sparkform:hfToken goes only to the origin it was given for", () => {
  it("a staged model on a third-party mirror gets no token, at resolve or on the node", async () => {
    const c = await cluster("t1", { mirrored: pinned(staged.mirrored!, mirror.url) });
    const results = await Promise.all([settle(c.model!.commit), settle(c.staged.mirrored!.commit)]);
    expect(results.map((r) => r.ok)).toEqual([true, true]);
    // The main model's endpoint (the token's own) still gets it.
    expect(hub.log().length).toBeGreaterThan(0);
    expect(hub.log().every((l) => l.auth)).toBe(true);
    // The mirror saw requests (the resolve and the GGUF header), none with a token.
    expect(mirror.log().length).toBeGreaterThan(0);
    expect(mirror.log().filter((l) => l.auth)).toEqual([]);
    // Wait for the replicas to register; the downloading node's has the token only for `model`.
    await new Promise((r) => setTimeout(r, 200));
    const own = replicas("t1-model");
    const mirrored = replicas("t1-models-mirrored");
    expect(own.length).toBe(2);
    expect(mirrored.length).toBe(2);
    expect(tokens(own)).toEqual([TOKEN, undefined]);
    expect(tokens(mirrored)).toEqual([undefined, undefined]);
  });

  it("a staged model opts in with sendToken: true; one at the token's origin needs none", async () => {
    const c = await cluster("t2", {
      optin: pinned(staged.optin!, mirror.url, { sendToken: true }),
      samehub: pinned(staged.samehub!, `${hub.url}/`),
    });
    const results = await Promise.all(
      [c.model!, c.staged.optin!, c.staged.samehub!].map((m) => settle(m.commit)),
    );
    expect(results.map((r) => r.ok)).toEqual([true, true, true]);
    expect(mirror.log().length).toBeGreaterThan(0);
    expect(mirror.log().every((l) => l.auth)).toBe(true);
    await new Promise((r) => setTimeout(r, 200));
    for (const p of ["t2-models-optin", "t2-models-samehub"])
      expect(tokens(replicas(p))).toEqual([TOKEN, undefined]);
  });

  it("a mirror without the opt-in answering 401 says the token was withheld, and the fix", async () => {
    let r: Awaited<ReturnType<typeof settle>> | undefined;
    const unhandled = await rejections(async () => {
      const c = await cluster("t3", { gated: pinned(staged.gated!, gated.url) });
      r = await settle(c.staged.gated!.commit);
    });
    expect(r?.ok).toBe(false);
    // What fails the preview: the same message, from the replicas that could not register.
    expect(unhandled.length).toBeGreaterThan(0);
    for (const u of unhandled) expect(u).toContain("sparkform:hfToken was withheld");
    expect(gated.log().filter((l) => l.auth)).toEqual([]);
    const message = r && !r.ok ? r.message : "";
    expect(message).toContain("HTTP 401");
    expect(message).toContain("sparkform:hfToken was withheld");
    expect(message).toContain(`is not ${hub.url}`);
    expect(message).toContain("sendToken: true on sparkform:models.gated");
  });
});
