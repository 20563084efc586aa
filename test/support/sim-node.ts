// What a test reads off a simulated node: units, listening sockets, files. Shared by the e2e,
// acceptance and fault tests so each asserts on the node itself the same way.
import { homeRelative, type SshTarget } from "../../components/transport";
import { apiKeyPath } from "../../components/unit/names";
import { simExec } from "../../sim/index";
import type { SimCluster } from "../../sim/state";

/** How the control node reaches a simulated node: its management address, pinned host key. */
export function simTarget(cluster: SimCluster, name: string): SshTarget {
  const n = cluster.nodes.find((x) => x.name === name);
  if (!n) throw new Error(`no node ${name} in the simulated cluster`);
  return {
    name: n.name,
    host: n.mgmtAddress,
    port: n.sshPort,
    user: n.user,
    hostKey: n.hostKey,
    identityFile: cluster.sshKeyPath,
    sshConfigPath: cluster.sshConfigPath,
  };
}

/** A shell script on a node as `user` (login environment: `systemctl --user` works). */
export async function asUser(node: string, script: string, user = "spark"): Promise<string> {
  const r = await simExec(node, ["sh", "-c", script], { user });
  return r.stdout.trim();
}

/** sparkform's user units on a node, any state (`systemctl --user list-units --all`). */
export async function sparkformUnits(node: string): Promise<string[]> {
  const out = await asUser(
    node,
    "systemctl --user list-units --all --no-legend --plain 'sparkform-*' | awk '{print $1}'",
  );
  return out === "" ? [] : out.split("\n").sort();
}

/** Ports in LISTEN state on a node (the kernel's table, IPv4 and IPv6). */
export async function listeningPorts(node: string): Promise<number[]> {
  const out = await asUser(node, "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null");
  const ports = new Set<number>();
  for (const line of out.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f[3] === "0A" && f[1]) ports.add(parseInt(f[1].split(":").pop() ?? "0", 16));
  }
  return [...ports].sort((a, b) => a - b);
}

/**
 * Every path under `roots` on a node (as root, one file system each), sorted: the baseline a
 * destroyed stack must come back to. Paths matching `ignore` (the journal, systemd's own state)
 * are left out.
 */
export async function fileListing(
  node: string,
  roots: readonly string[],
  ignore: readonly RegExp[] = [],
): Promise<string[]> {
  const r = await simExec(node, ["find", ...roots, "-xdev"]);
  return r.stdout
    .split("\n")
    .filter((p) => p !== "" && !ignore.some((re) => re.test(p)))
    .sort();
}

/**
 * A curl on a node that sends the key llama-server on `port` checks (every stack has one):
 * read from its 0600 file there and given to curl as a header on stdin, never in an argv. Put
 * curl's own arguments after it.
 */
export const keyedCurl = (port: number): string =>
  `printf 'Authorization: Bearer %s\\n' "$(cat "$HOME/${homeRelative(apiKeyPath("server", port))}")" | curl -H @-`;
