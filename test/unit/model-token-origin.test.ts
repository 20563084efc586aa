// Issue 33 item 10: the one decision of whether sparkform:hfToken goes to a model's endpoint
// (components/model/token-origin.ts): the origin it was given for (scheme, host and port, by
// URL parsing, never a string prefix), or an explicit opt-in.
import { describe, expect, it } from "vitest";
import { MODEL_ENDPOINT_DEFAULT } from "../../components/model/config";
import { ConfigError, parseStackConfig } from "../../components/stack-config";
import { tokenFor, withheldNote } from "../../components/model/token-origin";

describe("tokenFor(endpoint, sendToken, origin)", () => {
  it("the default token origin is the config's default endpoint, the public hub", () => {
    expect(MODEL_ENDPOINT_DEFAULT).toBe("https://huggingface.co");
    expect(tokenFor(MODEL_ENDPOINT_DEFAULT, false)).toBe(true);
  });

  it.each([
    ["the hub itself", "https://huggingface.co", true],
    ["a trailing slash", "https://huggingface.co/", true],
    ["a path below it", "https://huggingface.co/some/base", true],
    ["the default port spelled out", "https://huggingface.co:443", true],
    ["upper-case host", "https://HuggingFace.co", true],
    ["plain http", "http://huggingface.co", false],
    ["another port", "https://huggingface.co:8443", false],
    ["a subdomain", "https://cdn.huggingface.co", false],
    ["a look-alike prefix", "https://huggingface.co.evil.example", false],
    ["a look-alike with user-info", "https://huggingface.co@evil.example", false],
    ["a third-party mirror", "https://hf-mirror.com", false],
    ["not a URL", "huggingface.co", false],
  ] as const)("%s (%s) → %s without the opt-in", (_what, endpoint, sends) => {
    expect(tokenFor(endpoint, false)).toBe(sends);
  });

  it("an opt-in sends it anywhere the model's endpoint is", () => {
    expect(tokenFor("https://hf-mirror.com", true)).toBe(true);
    expect(tokenFor("http://127.0.0.1:18765", true)).toBe(true);
  });

  it("the origin is the one the token was given for (sparkform:model.endpoint)", () => {
    const own = "http://127.0.0.1:18765";
    expect(tokenFor("http://127.0.0.1:18765/", false, own)).toBe(true);
    expect(tokenFor("http://127.0.0.1:18766", false, own)).toBe(false);
    expect(tokenFor("https://huggingface.co", false, own)).toBe(false);
  });

  it("the withheld note names the model's key, both origins and the opt-in", () => {
    expect(withheldNote("models.b", "https://hf-mirror.com/x", "https://huggingface.co")).toBe(
      "sparkform:hfToken was withheld: the endpoint https://hf-mirror.com is not https://huggingface.co, " +
        "the origin the token is for. If this endpoint should have it, set sendToken: true on " +
        "sparkform:models.b (the token then goes to https://hf-mirror.com)",
    );
  });
});

describe("sendToken in the config", () => {
  const hostKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1xXcB0Y0vRk8Jm1b7hQ5cX3kT2m4yG9wZ8sV6pL0e";
  const nodes = [{ name: "spark-1", host: "10.0.0.2", user: "spark", hostKey }];
  const model = { repo: "org/name", revision: "a".repeat(40), files: ["m.gguf"] };
  const lines = (raw: Record<string, unknown>) => {
    try {
      parseStackConfig(raw);
      return [];
    } catch (e) {
      return (e as ConfigError).lines;
    }
  };

  it("defaults to false, on sparkform:model and on each staged model", () => {
    const c = parseStackConfig({
      nodes,
      model,
      models: { b: { ...model, repo: "org/b", endpoint: "https://hf-mirror.com" } },
    });
    expect(c.model?.sendToken).toBe(false);
    expect(c.models?.b?.sendToken).toBe(false);
  });

  it("a value that is not true or false is refused, naming the key", () => {
    expect(
      lines({ nodes, model, models: { b: { ...model, repo: "org/b", sendToken: "yes" } } }),
    ).toEqual([
      'sparkform:models.b.sendToken: is "yes", not true or false; write it as true or false',
    ]);
  });
});
