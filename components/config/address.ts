// IP addresses compared as addresses, never as strings: `fd00:0:0::5` is `fd00::5`,
// `0:0:0:0:0:0:0:1` is `::1`, and `::ffff:127.0.0.1` reaches the same socket as `127.0.0.1`.
// A check that compares spellings lets an unauthenticated server through on any of them, so
// every bind check (the worker's, the server's) asks these functions. node:net's BlockList
// matches IPv4-mapped IPv6 against IPv4 ranges and back, which is what a socket does.
import { BlockList, isIP } from "node:net";

const family = (a: string): "ipv4" | "ipv6" => (isIP(a) === 6 ? "ipv6" : "ipv4");

function blockList(ranges: readonly (readonly [string, number])[]): BlockList {
  const b = new BlockList();
  for (const [net, prefix] of ranges) b.addSubnet(net, prefix, family(net));
  return b;
}

// 0.0.0.0/8 is "this network": 0.0.0.0 binds every interface, and no other address in it is
// one a node has.
const UNSPECIFIED = blockList([
  ["0.0.0.0", 8],
  ["::", 128],
]);
const LOOPBACK = blockList([
  ["127.0.0.0", 8],
  ["::1", 128],
]);

const inRange = (b: BlockList, a: string) => isIP(a) !== 0 && b.check(a, family(a));

/** The wildcard (every interface), in any spelling: `0.0.0.0`, `::`, `0::`, `::ffff:0.0.0.0`. */
export const isUnspecifiedAddress = (a: string): boolean => inRange(UNSPECIFIED, a);

/** Loopback, as a range and in any spelling: 127.0.0.0/8, `::1`, `::ffff:127.0.0.1`. */
export const isLoopbackAddress = (a: string): boolean => inRange(LOOPBACK, a);

/** Whether two IP literals are one address (IPv4-mapped IPv6 included); false for names. */
export function sameAddress(a: string, b: string): boolean {
  if (isIP(a) === 0 || isIP(b) === 0) return false;
  const one = new BlockList();
  one.addAddress(b, family(b));
  return one.check(a, family(a));
}
