// readStackConfig against the Pulumi SDK's real config store (pulumi.runtime.setAllConfig is
// how the language host hands a program its stack config): structured keys arrive as JSON
// text, plain keys as strings, secrets stay secret Outputs and never reach the parsed data.
import * as pulumi from "@pulumi/pulumi";
import { afterEach, describe, expect, it } from "vitest";
import { readStackConfig } from "../../components/stack-config";

const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1xXcB0Y0vRk8Jm1b7hQ5cX3kT2m4yG9wZ8sV6pL0e";
const nodes = [
  { name: "spark-1", host: "10.0.0.2", user: "spark", hostKey },
  { name: "spark-2", host: "10.0.0.3", user: "spark", hostKey },
];
const model = { repo: "org/name", revision: "a".repeat(40), files: ["m.gguf"] };
const KEY =
  "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----";
const TOKEN = "hf_notarealtoken0123456789";

function stack(values: Record<string, unknown>, secrets: string[] = []): pulumi.Config {
  pulumi.runtime.setAllConfig(
    Object.fromEntries(
      Object.entries(values).map(([k, v]) => [
        `sparkform:${k}`,
        typeof v === "string" ? v : JSON.stringify(v),
      ]),
    ),
    secrets.map((k) => `sparkform:${k}`),
  );
  return new pulumi.Config("sparkform");
}

/** The value and secretness of an Output, as the engine would see them. */
async function unwrap(o: pulumi.Output<string> | undefined): Promise<[string, boolean]> {
  if (!o) throw new Error("no output");
  const value = await new Promise<string>((resolve) => o.apply((v) => resolve(v)));
  return [value, await pulumi.isSecret(o)];
}

afterEach(() => pulumi.runtime.setAllConfig({}));

describe("readStackConfig", () => {
  it("reads structured keys, plain strings and secrets; the secrets stay secret Outputs", async () => {
    const c = readStackConfig(
      stack(
        {
          nodes,
          sshKeyPath: "/home/me/.ssh/id_ed25519",
          tree: { source: ".", dest: "~/src/llama.cpp" },
          model,
          privateKey: KEY,
          hfToken: TOKEN,
        },
        ["privateKey", "hfToken"],
      ),
      { projectDir: __dirname },
    );
    expect(c.nodes.map((n) => n.name)).toEqual(["spark-1", "spark-2"]);
    expect(c.sshKeyPath).toBe("/home/me/.ssh/id_ed25519");
    expect(c.tree?.source).toBe(__dirname);
    expect(c.model?.nodes).toEqual(["spark-1", "spark-2"]);
    expect(await unwrap(c.privateKey)).toEqual([KEY, true]);
    expect(await unwrap(c.hfToken)).toEqual([TOKEN, true]);
    // Nothing of the secrets is in the plain data.
    const plain = JSON.stringify({ ...c, privateKey: undefined, hfToken: undefined });
    expect(plain).not.toContain("BEGIN OPENSSH");
    expect(plain).not.toContain(TOKEN);
  });

  it("without secrets there are no secret Outputs", () => {
    const c = readStackConfig(stack({ nodes }));
    expect(c.privateKey).toBeUndefined();
    expect(c.hfToken).toBeUndefined();
  });

  it("an unknown key is an error naming the known keys, without reading its value", () => {
    const read = () => readStackConfig(stack({ nodes, hftoken: TOKEN, nodez: "x" }));
    expect(read).toThrow(pulumi.RunError);
    expect(read).toThrow(
      "unknown stack configuration sparkform:hftoken, sparkform:nodez: sparkform reads " +
        "sparkform:nodes, sparkform:sshKeyPath, sparkform:sshConfigPath, sparkform:toolchain, " +
        "sparkform:tree, sparkform:build, sparkform:fabric, sparkform:model, sparkform:models, sparkform:worker, sparkform:server, sparkform:privateKey, sparkform:hfToken, sparkform:serverApiKey. " +
        "Fix the name, or remove it with `pulumi config rm`.",
    );
    expect(() => read()).not.toThrow(TOKEN);
  });

  it("a structured key set as plain text is reported with the other problems", () => {
    const read = () =>
      readStackConfig(stack({ nodes, tree: "~/src/llama.cpp", model: { ...model, retries: 99 } }));
    expect(read).toThrow(
      "sparkform:tree: is not a YAML map or list; write it as YAML in stacks/Pulumi.<stack>.yaml, " +
        "or set its fields with `pulumi config set --path sparkform:tree.<field> <value>`",
    );
    expect(read).toThrow("sparkform:model.retries: is 99, above the maximum; use 20 or less");
  });

  it("bad secrets are config errors that never quote the secret", () => {
    const bad = "hf_abc\nX-Injected: 1";
    const read = () =>
      readStackConfig(
        stack({ nodes, privateKey: "ssh-ed25519 AAAA-a-public-key", hfToken: bad }, [
          "privateKey",
          "hfToken",
        ]),
      );
    expect(read).toThrow(
      "sparkform:privateKey: is not a PEM/OpenSSH private key; set the key file's whole text with " +
        "`pulumi config set --secret sparkform:privateKey < ~/.ssh/id_ed25519`",
    );
    expect(read).toThrow(
      "sparkform:hfToken: contains whitespace or a control character; set the token alone with " +
        "`pulumi config set --secret sparkform:hfToken hf_…`",
    );
    expect(read).not.toThrow("AAAA-a-public-key");
    expect(read).not.toThrow("X-Injected");
  });

  it("config mistakes are RunErrors (printed without a stack trace), naming key and fix", () => {
    expect(() => readStackConfig(stack({ nodes: [] }))).toThrow(
      /^invalid stack configuration:\n {2}sparkform:nodes: list at least one node; add each node's name, host, user and hostKey\nFix it in stacks\/Pulumi\.<stack>\.yaml/,
    );
    expect(() => readStackConfig(stack({}))).toThrow(
      "sparkform:nodes: is missing; set it to a list",
    );
  });
});
