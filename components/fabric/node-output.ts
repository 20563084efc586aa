// Parsers of what a node prints for a FabricLink (besides native/fabric/rail-rtt-throughput.py, probe.ts).

/** The interface holding `host` in `ip -j -4 addr` output, or null. */
export function ifaceHolding(stdout: string, host: string): string | null {
  try {
    const links = JSON.parse(stdout) as { ifname?: string; addr_info?: { local?: string }[] }[];
    return links.find((l) => (l.addr_info ?? []).some((a) => a.local === host))?.ifname ?? null;
  } catch {
    return null;
  }
}
