// The Serving stage's state upgrades (components/serving/state-upgrade.ts): a LlamaServer as an
// older sparkform recorded it (before the key, topologies, the RSS guard or drift) comes back in
// the current shape; the current shape comes back as it is; and the provider's diff, given the
// old shape, sees what it saw before the branches moved: no change for unchanged inputs.
import { describe, expect, it } from "vitest";
import { programRef } from "../../components/native-script";
import { provider } from "../../components/serving/provider";
import { SERVER_PROGRAMS } from "../../components/serving/commands";
import type { LlamaServerInputs, LlamaServerOutputs } from "../../components/serving/state";
import { upgradeLlamaServer, upgradeServingDrain } from "../../components/serving/state-upgrade";

const target = { name: "spark-1", host: "10.0.0.11", port: 22, user: "spark", hostKey: "k" };
const programs = Object.fromEntries(
  Object.entries(SERVER_PROGRAMS).map(([k, p]) => [k, programRef(p)]),
) as LlamaServerInputs["programs"];

const inputs = (): LlamaServerInputs =>
  ({
    kind: "LlamaServer",
    providerVersion: "2",
    target,
    node: "spark-1",
    bind: "127.0.0.1",
    port: 8080,
    unit: "sparkform-llama-server-8080",
    plan: { fits: true, known: true },
    evidence: { builds: {}, models: {} },
    flags: ["-m", "~/m.gguf"],
    binary: "/b/bin/llama-server",
    binaryDigest: "a".repeat(64),
    modelPath: "~/m.gguf",
    smokeRequest: { prompt: "p", tokens: 8, seed: 1 },
    workers: [],
    healthTimeoutSeconds: 1800,
    rssLimitPercent: 0,
    rssIntervalSeconds: 2,
    programs,
  }) as unknown as LlamaServerInputs;

const current = (): LlamaServerOutputs =>
  ({
    ...inputs(),
    standby: false,
    apiKeySha256: "",
    url: "http://127.0.0.1:8080",
    health: '{"status":"ok"}',
    placement: [],
    smoke: {},
    status: {},
    started: { invocationId: "x", nRestarts: "0" },
    drift: [],
  }) as unknown as LlamaServerOutputs;

/** `current()` without `keys`, as an older sparkform wrote it. */
const without = (o: LlamaServerOutputs, ...keys: string[]): LlamaServerOutputs =>
  Object.fromEntries(
    Object.entries(o).filter(([k]) => !keys.includes(k)),
  ) as unknown as LlamaServerOutputs;
/** A keyless server as a sparkform before keys, topologies and drift wrote it. */
const beforeKeys = () => without(current(), "apiKeySha256", "standby", "drift");
/** ... and before the RSS guard: neither its limit nor its interval. */
const beforeGuard = () => without(beforeKeys(), "rssLimitPercent", "rssIntervalSeconds");

describe("LlamaServer's state upgrade", () => {
  it("fills what older state lacks: no key, serving (not standby), no drift", () => {
    expect(upgradeLlamaServer(beforeKeys())).toEqual(current());
  });

  it("before the guard: a limit of 0 (no guard ran); the interval is left to the diff", () => {
    expect(upgradeLlamaServer(beforeGuard())).toEqual(
      without({ ...current(), rssLimitPercent: 0 }, "rssIntervalSeconds"),
    );
  });

  it("gives the current shape back unchanged", () => {
    expect(upgradeLlamaServer(current())).toEqual(current());
    expect(upgradeLlamaServer(upgradeLlamaServer(beforeGuard()))).toEqual(
      upgradeLlamaServer(beforeGuard()),
    );
  });

  it("the provider's diff of old state against unchanged inputs is no change", async () => {
    expect(await provider.diff?.("id", beforeKeys(), inputs())).toEqual({
      changes: false,
      replaces: [],
    });
  });

  it("state from before the guard restarts the server into one, as it always did", async () => {
    const guarded = { ...inputs(), rssLimitPercent: 92 };
    expect(await provider.diff?.("id", beforeGuard(), guarded)).toEqual({
      changes: true,
      replaces: [],
      diffs: ["rssLimitPercent", "rssIntervalSeconds"],
    });
  });

  it("old state with drift recorded still restarts", async () => {
    const drifted = { ...beforeKeys(), drift: ["unit gone"] } as LlamaServerOutputs;
    expect(await provider.diff?.("id", drifted, inputs())).toMatchObject({
      changes: true,
      diffs: ["drift"],
    });
  });
});

describe("ServingDrain's state upgrade", () => {
  it("gives its one shape back unchanged", () => {
    const o = {
      kind: "ServingDrain" as const,
      target,
      port: 8080,
      builds: {},
      programs: { stop: programRef("unit/stop.sh") },
      drainedAt: "",
    };
    expect(upgradeServingDrain(o)).toEqual(o);
  });
});
