// Setup file of the tiers whose every test needs root (the simulated pair: namespaces, mounts,
// containers). One check for the whole tier instead of one per file; the files' own checks
// stay, so a file run on its own still says why it skipped.
import { isRoot, requireOrSkip } from "../support/requires";

requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers");
