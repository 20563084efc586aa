// native/unit/start.sh's own bind checks (the worker's --not-on-management), run for real in
// a network namespace with the
// real `ip`: the worker must bind an address of the node, never one on the interface that
// carries the management session (the interface of $SSH_CONNECTION's server address), in
// whatever way the control node's config named that address. The checks come before anything
// is started, so a bind that passes them stops at the next check (the binary, absent here).
import { execFileSync, spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import { startCommand, workerPrograms } from "../../components/rpc-worker/commands";
import { isRoot, requireOrSkip } from "../support/requires";

const NS = `sf-start-${process.pid}`;
const ip = (...args: string[]) => execFileSync("ip", ["-n", NS, ...args]);

beforeAll(() => {
  if (!isRoot) return;
  execFileSync("ip", ["netns", "add", NS]);
  // mgmt0 carries the ssh session (10.9.0.2) and a second address on the same link; fab0 is
  // the fabric (veth pairs: this kernel has no dummy links).
  ip("link", "add", "mgmt0", "type", "veth", "peer", "name", "mgmt0p");
  ip("addr", "add", "10.9.0.2/24", "dev", "mgmt0");
  ip("addr", "add", "192.168.78.2/24", "dev", "mgmt0");
  ip("link", "add", "fab0", "type", "veth", "peer", "name", "fab0p");
  ip("addr", "add", "192.168.77.2/24", "dev", "fab0");
  for (const d of ["lo", "mgmt0", "mgmt0p", "fab0", "fab0p"]) ip("link", "set", d, "up");
});
afterAll(() => {
  if (isRoot) execFileSync("ip", ["netns", "del", NS]);
});

/** start.sh in the namespace, as the worker's ssh session runs it. */
function start(bind: string, session = "10.9.0.1 50000 10.9.0.2 22") {
  // The argv the provider sends (the unit's start.sh with the worker's options).
  const args =
    startCommand({
      binary: "no/such/ggml-rpc-server",
      bind,
      port: 50052,
      threads: 0,
      devices: [],
      cache: true,
      debug: true,
      clientBuild: { digest: "0".repeat(64) },
      rssLimitPercent: 92,
      rssIntervalSeconds: 2,
      programs: workerPrograms(),
    }).args ?? [];
  const r = spawnSync("ip", ["netns", "exec", NS, "sh", programPath("unit/start.sh"), ...args], {
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: "/nonexistent", SSH_CONNECTION: session },
  });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

describe.skipIf(requireOrSkip("root", isRoot, "start.sh runs in a network namespace of its own"))(
  "start.sh refuses a bind on the management session's interface",
  () => {
    it("another address on the interface the session came in on is refused, before anything starts", () => {
      const r = start("192.168.78.2");
      expect(r.status).toBe(9);
      expect(r.stderr).toBe(
        "192.168.78.2 is on mgmt0, the interface that carries this management session " +
          "(sshd answered on 10.9.0.2): ggml-rpc-server has no authentication, so every host " +
          "that reaches that network would reach it. Give the node a fabric address on its own " +
          "interface (sparkform:nodes[].fabricAddress) and bind that; the worker stays stopped\n",
      );
      expect(r.stdout).toBe("");
    });
    it("the session's own address, as an IPv4-mapped session address, is refused too", () => {
      const r = start("10.9.0.2", "::ffff:10.9.0.1 50000 ::ffff:10.9.0.2 22");
      expect(r.status).toBe(9);
      expect(r.stderr).toContain(
        "10.9.0.2 is on mgmt0, the interface that carries this management session",
      );
    });
    it("a fabric address passes the bind checks (and stops at the absent binary)", () => {
      const r = start("192.168.77.2");
      expect(r.stderr).toBe(
        "/nonexistent/no/such/ggml-rpc-server is not an executable file on this node\n",
      );
      expect(r.status).toBe(3);
    });
    it("an address the node does not have is refused as before", () => {
      const r = start("192.168.79.2");
      expect(r.status).toBe(4);
      expect(r.stderr).toMatch(/^192\.168\.79\.2 is not an address of this node \(/);
    });
  },
);
