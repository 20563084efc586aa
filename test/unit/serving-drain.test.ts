// ServingDrain's update: which node it reaches to stop the server. The server runs on the
// client node; when that node's address or host key changed (a re-provisioned node, the sim
// re-made on another subnet) the old address answers nothing, so the node's current target is
// the one to reach. Only a different client node is reached at its old target.
import { beforeEach, describe, expect, it, vi } from "vitest";
import { update } from "../../components/serving/drain-provider";
import type { SshTarget } from "../../components/transport";

const reached: SshTarget[] = [];
// Spread the original: the index also serves modules that only quote or build commands.
vi.mock("../../components/transport", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../components/transport")>()),
  openNode: (t: SshTarget) => ({
    run: async () => {
      reached.push(t);
      return { stdout: "stopped=x\n", stderr: "", exitCode: 0 };
    },
  }),
}));
vi.mock("../../components/providers/progress", () => ({ progress: async () => undefined }));

type Inputs = Parameters<typeof update>[2];

const target = (name: string, host: string): SshTarget =>
  ({ name, host, port: 22, user: "spark", hostKey: `ssh-ed25519 AAAA-${host}` }) as SshTarget;

const inputs = (t: SshTarget, commit: string): Inputs => ({
  kind: "ServingDrain",
  target: t,
  port: 8080,
  builds: { "spark-1": { commit, treeDigest: "d", artifacts: {} } },
  programs: { stop: { name: "serving/stop.sh", sha256: "0".repeat(64) } } as Inputs["programs"],
});

describe("ServingDrain update", () => {
  beforeEach(() => {
    reached.length = 0;
  });

  it("reaches the client node at its current address when only the address changed", async () => {
    const olds = { ...inputs(target("spark-1", "10.213.0.11"), "a"), drainedAt: "" };
    await update("id", olds, inputs(target("spark-1", "10.213.241.11"), "b"));
    expect(reached.map((t) => t.host)).toEqual(["10.213.241.11"]);
  });

  it("reaches the old client node when the client moved to another node", async () => {
    const olds = { ...inputs(target("spark-1", "10.213.0.11"), "a"), drainedAt: "" };
    await update("id", olds, inputs(target("spark-2", "10.213.0.12"), "b"));
    expect(reached.map((t) => `${t.name}@${t.host}`)).toEqual(["spark-1@10.213.0.11"]);
  });
});
