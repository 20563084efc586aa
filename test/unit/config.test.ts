import { describe, expect, it } from "vitest";
import { ConfigError, parseStackConfig } from "../../components/stack-config";

const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1xXcB0Y0vRk8Jm1b7hQ5cX3kT2m4yG9wZ8sV6pL0e";
const node = { name: "spark-1", host: "10.0.0.2", user: "spark", hostKey };

function errorOf(raw: Record<string, unknown>): string {
  try {
    parseStackConfig(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("parseStackConfig", () => {
  it("fills defaults", () => {
    const c = parseStackConfig({ nodes: [node], tree: { source: ".", dest: "~/src/x" } });
    expect(c.nodes[0]?.port).toBe(22);
    expect(c.tree?.exclude).toEqual([]);
  });

  it.each([
    [{ nodes: [] }, "sparkform:nodes: list at least one node"],
    [
      { nodes: [{ ...node, hostKey: "" }] },
      "sparkform:nodes[0].hostKey: must be the node's public host key",
    ],
    [{ nodes: [{ ...node, name: "spark 1" }] }, "sparkform:nodes[0].name: use letters, digits"],
    [
      { nodes: [{ ...node, user: "$(reboot)" }] },
      "sparkform:nodes[0].user: is not a valid user name",
    ],
    [{ nodes: [{ ...node, port: 70000 }] }, "sparkform:nodes[0].port:"],
    [{ nodes: [node, node] }, "sparkform:nodes: node names must be unique"],
    [
      { nodes: [node], tree: { source: ".", dest: "src/x" } },
      "sparkform:tree.dest: must be absolute or start with ~/",
    ],
    [
      { nodes: [node], tree: { source: ".", dest: "~/../etc" } },
      "sparkform:tree.dest: must not contain '..'",
    ],
    [
      {
        nodes: [node],
        tree: { source: ".", dest: "~/x", exclude: [{ path: "a/*", reason: "r" }] },
      },
      "sparkform:tree.exclude[0].path: is a literal relative path (no wildcards)",
    ],
    [
      { nodes: [node], tree: { source: ".", dest: "~/x", exclude: [{ path: ".git" }] } },
      "sparkform:tree.exclude[0].reason:",
    ],
    [
      {
        nodes: [node],
        tree: { source: ".", dest: "~/x", exclude: [{ path: "a", name: "b", reason: "r" }] },
      },
      "sparkform:tree.exclude[0]: give exactly one of path or name",
    ],
    [
      { nodes: [node], tree: { source: ".", dest: "~/x$(reboot)" } },
      "sparkform:tree.dest: may contain only letters, digits and . _ / ~ + @ -",
    ],
    // The unknown-key check moved here from index.ts, with index.ts's message (issue 9, item 4).
    [
      { nodes: [node], surprise: 1 },
      "unknown stack configuration sparkform:surprise: sparkform reads sparkform:nodes,",
    ],
  ])("rejects %j", (raw, message) => {
    const text = errorOf(raw);
    expect(text).toContain(message);
    expect(text).toContain("pulumi config set");
  });
});
