// The Router's state upgrade (components/router/state-upgrade.ts): a router as an older
// sparkform recorded it (before every stack had a key, before drift) comes back in the current
// shape; the current shape comes back as it is; the provider's diff, given the old shape, sees
// no change for unchanged inputs.
import { describe, expect, it } from "vitest";
import { programRef } from "../../components/native-script";
import { configText, provider } from "../../components/router/provider";
import type { RouterInputs, RouterOutputs } from "../../components/router/state";
import { upgrade } from "../../components/router/state-upgrade";
import { textDigest } from "../../components/router/commands";

const inputs = (): RouterInputs => ({
  kind: "Router",
  providerVersion: "1",
  target: { name: "spark-1", host: "10.0.0.11", port: 22, user: "spark", hostKey: "k" },
  node: "spark-1",
  bind: "127.0.0.1",
  port: 8090,
  arch: "x86_64",
  artifact: { version: "v2", key: "0123456789abcdef", arch: "amd64" },
  upstreams: [{ node: "spark-1", url: "http://127.0.0.1:8080" }],
  topology: "single",
  unavailable: "down",
  healthIntervalSeconds: 1,
  healthTimeoutSeconds: 60,
  programs: {
    start: programRef("unit/start.sh"),
    stop: programRef("unit/stop.sh"),
    status: programRef("unit/status.py"),
    files: programRef("router/files.sh"),
  },
});

const current = (): RouterOutputs => ({
  ...inputs(),
  apiKeySha256: "",
  url: "http://127.0.0.1:8090",
  unit: "sparkform-router-8090",
  binary: "~/.cache/sparkform/router/caddy-aaaaaaaaaaaaaaaa",
  binaryDigest: "a".repeat(64),
  configDigest: textDigest(configText(inputs())),
  status: {} as RouterOutputs["status"],
  started: { invocationId: "x", nRestarts: "0" },
  drift: [],
});

/** A keyless router as a sparkform before keys and drift wrote it. */
const older = (): RouterOutputs => {
  const { apiKeySha256: _k, drift: _d, ...rest } = current();
  return rest as RouterOutputs;
};

describe("Router's state upgrade", () => {
  it("fills what older state lacks: no key, no drift", () => {
    expect(upgrade(older())).toEqual(current());
  });

  it("gives the current shape back unchanged", () => {
    expect(upgrade(current())).toEqual(current());
    expect(upgrade(upgrade(older()))).toEqual(current());
  });

  it("the provider's diff of old state against unchanged inputs is no change", async () => {
    expect(await provider.diff?.("id", older(), inputs())).toEqual({
      changes: false,
      replaces: [],
    });
  });

  it("a key set since the old state restarts the router, as it always did", async () => {
    expect(await provider.diff?.("id", older(), { ...inputs(), apiKey: "k" })).toMatchObject({
      changes: true,
      diffs: expect.arrayContaining(["apiKey"]),
    });
  });
});
