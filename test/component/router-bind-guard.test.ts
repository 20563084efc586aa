// The router's bind off loopback, three layers like the server's and the worker's: the Router
// component refuses one without a key, the router-bind policy refuses one without a recorded
// key or on the node's management address, and the node's start.sh gets --not-on-management.
import { beforeAll, describe, expect, it } from "vitest";
import { programRef } from "../../components/native-script";
import { installCommand, startCommand } from "../../components/router/provider";
import { Router } from "../../components/router/router";
import { checkRouterBind, routerBind } from "../../policies/router";
import { setPulumiMocks } from "../support/pulumi-mocks";

beforeAll(() => setPulumiMocks());

const target = { name: "spark-1", host: "192.168.1.5", port: 22, user: "spark", hostKey: "" };

describe("the Router component", () => {
  const make = (bind: string, apiKey?: string) =>
    new Router(`r-${bind}-${apiKey ?? "none"}`, {
      target,
      node: "spark-1",
      bind,
      port: 8000,
      arch: "x86_64",
      upstreams: [{ node: "spark-1", url: "http://127.0.0.1:8080" }],
      topology: "single",
      unavailable: "down",
      ...(apiKey ? { apiKey } : {}),
    });

  it("refuses a bind off loopback without a key, naming the key and the fix", () => {
    expect(() => make("10.0.0.1")).toThrow(
      /router on spark-1 would bind 10\.0\.0\.1 \(not loopback\) without an API key.*sparkform:server\.router\.bind/,
    );
    expect(() => make("10.0.0.1")).toThrow(/sparkform:serverApiKey/);
  });

  it("takes loopback without a key, and a bind off loopback with one", () => {
    expect(() => make("127.0.0.1")).not.toThrow();
    expect(() => make("10.0.0.1", "k")).not.toThrow();
  });
});

describe("the router-bind policy", () => {
  it("refuses a bind off loopback with no key recorded", () => {
    expect(checkRouterBind("spark-1", { target, bind: "10.0.0.1" }, { apiKeySha256: "" })).toEqual([
      expect.stringMatching(
        /The router on spark-1 binds 10\.0\.0\.1, not loopback, with no API key recorded.*sparkform:server\.router\.bind/,
      ),
    ]);
  });

  it("takes a bind off loopback with a key recorded (as input or as its digest)", () => {
    expect(
      checkRouterBind("spark-1", { target, bind: "10.0.0.1" }, { apiKeySha256: "a".repeat(64) }),
    ).toEqual([]);
    expect(checkRouterBind("spark-1", { target, bind: "10.0.0.1" }, { apiKey: "k" })).toEqual([]);
    expect(checkRouterBind("spark-1", { target, bind: "127.0.0.1" }, {})).toEqual([]);
  });

  it("leaves a key this run does not know yet to be judged after the change", () => {
    expect(checkRouterBind("spark-1", { target, bind: "10.0.0.1" }, { unknown: true })).toEqual([]);
  });

  it("refuses the node's management address and the wildcard, key or not", () => {
    for (const bind of ["192.168.1.5", "::ffff:192.168.1.5", "0.0.0.0", "::"])
      expect(checkRouterBind("spark-1", { target, bind }, { apiKey: "k" })).toEqual([
        expect.stringMatching(/The router on spark-1 must not bind there/),
      ]);
  });

  it("is a mandatory policy that reads a Router's props (secrets unpacked)", () => {
    expect(routerBind.enforcementLevel).toBe("mandatory");
    const found: string[] = [];
    const validate = routerBind.validateResource as (a: unknown, r: (m: string) => void) => void;
    validate(
      {
        type: "pulumi-nodejs:dynamic/sparkform:Router",
        name: "r",
        urn: "urn:r",
        props: { target, bind: "10.0.0.1", port: 8000, binaryDigest: "" },
      },
      (m) => found.push(m),
    );
    expect(found).toEqual([expect.stringMatching(/with no API key recorded/)]);
  });
});

describe("the router's start (native/unit/start.sh's arguments)", () => {
  const programs = {
    start: programRef("unit/start.sh"),
    stop: programRef("unit/stop.sh"),
    status: programRef("unit/status.py"),
    files: programRef("router/files.sh"),
  };
  const argsFor = (bind: string) => [
    ...(startCommand(
      { bind, port: 8000, programs, healthTimeoutSeconds: 60 },
      "caddy",
      "d".repeat(64),
    ).args ?? []),
  ];

  it("passes --not-on-management for a bind off loopback, not for loopback", () => {
    const off = argsFor("10.0.0.1");
    expect(off.slice(0, off.indexOf("--"))).toContain("--not-on-management");
    expect(argsFor("127.0.0.1")).not.toContain("--not-on-management");
  });
});

describe("the router's key on its way to the node", () => {
  it("travels in the secret preamble of files.sh install, never in its arguments", () => {
    const key = "0123456789abcdef0123456789abcdef";
    const programs = { files: programRef("router/files.sh") } as never;
    const cmd = installCommand(
      { programs, port: 8090, apiKey: key },
      "caddy-0123456789abcdef",
      "ab",
      "{}",
    );
    expect(cmd.env?.SPARKFORM_API_KEY).toEqual({ secret: key });
    expect(JSON.stringify(cmd.args)).not.toContain(key);
    expect(cmd.display).not.toContain(key);
    // Without a key, nothing is sent (files.sh then removes any key file).
    const keyless = installCommand({ programs, port: 8090 }, "caddy-0123456789abcdef", "ab", "{}");
    expect(keyless.env).toBeUndefined();
  });
});
