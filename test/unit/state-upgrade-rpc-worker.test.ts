// The RpcWorker's state upgrade (components/rpc-worker/state-upgrade.ts): a worker as an older
// sparkform recorded it (before the tensor cache's bound, before drift) comes back in the
// current shape; the current shape comes back as it is; the provider's diff, given the old
// shape, sees what it saw before: the cache still needs its bound, nothing else changed.
import { describe, expect, it } from "vitest";
import { provider, updateKind } from "../../components/rpc-worker/provider";
import type { RpcWorkerOutputs } from "../../components/rpc-worker/state";
import { upgrade } from "../../components/rpc-worker/state-upgrade";
import { workerInputs } from "../support/rpc-worker-inputs";

const current = (): RpcWorkerOutputs =>
  ({
    ...workerInputs(),
    endpoint: "192.168.100.2:50052",
    unit: "sparkform-rpc-worker-50052",
    guardUnit: "sparkform-rpc-guard-50052",
    status: {},
    started: { invocationId: "x", nRestarts: "0" },
    version: "3.0.0",
    clientVersion: "3.0.0",
    digest: "a".repeat(64),
    deviceMemory: [],
    health: { state: "up", detail: "HELLO" },
    transport: "tcp",
    prewarmed: null,
    tensorCache: null,
    drift: [],
  }) as unknown as RpcWorkerOutputs;

/** As a sparkform before the cache's bound and drift wrote it. */
const older = (): RpcWorkerOutputs => {
  const { tensorCache: _t, drift: _d, ...rest } = current();
  return rest as RpcWorkerOutputs;
};

describe("RpcWorker's state upgrade", () => {
  it("fills what older state lacks: no bound recorded (null), no drift", () => {
    expect(upgrade(older())).toEqual(current());
  });

  it("gives the current shape back unchanged", () => {
    const bounded = {
      ...current(),
      tensorCache: { maxBytes: 1e9, derived: true, drift: [] },
    } as RpcWorkerOutputs;
    expect(upgrade(bounded)).toEqual(bounded);
    expect(upgrade(upgrade(older()))).toEqual(current());
  });

  it("the provider's diff of old state: only the cache's missing bound, as before", async () => {
    expect(await provider.diff?.("id", older(), workerInputs())).toEqual({
      changes: true,
      replaces: [],
      diffs: ["tensorCache"],
    });
    // What `up` then does: a pre-warm beside the running worker, not a restart.
    expect(updateKind(upgrade(older()), workerInputs())).toBe("prewarm");
  });

  it("with the cache off, old state is no change", async () => {
    const off = workerInputs({ cache: false });
    expect(await provider.diff?.("id", { ...older(), cache: false }, off)).toEqual({
      changes: false,
      replaces: [],
    });
  });
});
