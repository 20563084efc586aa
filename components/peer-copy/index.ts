// Node-to-node copy (toolchain, compiler cache, model, build fan-out), one entry for the
// providers that copy: it sits above the transport and the native programs, which it uses.
export { peerCopyCommand, type Peer, type PeerCopy } from "./command";
export {
  copyFromPeer,
  copyFromPeerOrRelay,
  relayDirectory,
  type CopiedBy,
  type PeerCopyPlan,
  type Relay,
} from "./copy";
