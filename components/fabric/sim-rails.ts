// How the simulated cluster's rails map onto the Spark sysfs fixture: the sim's veths carry the
// addresses (fabric0, fabric1), the fixture's RDMA devices are bound to the Spark's netdevs.
// The dual-rail lab notes: rail 0 = rocep1s0f1/enp1s0f1np1, rail 1 = roceP2p1s0f1/enP2p1s0f1np1.

/** Per rail: the interface the sim gives it and the fixture netdev its RDMA facts come from. */
export const SIM_RAILS: readonly { readonly iface: string; readonly netdev: string }[] = [
  { iface: "fabric0", netdev: "enp1s0f1np1" },
  { iface: "fabric1", netdev: "enP2p1s0f1np1" },
];
