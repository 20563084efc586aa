// The proof stack's policy pack: `--policy-pack test/integration/foundation/proof-policies`. It guards the
// one kind only the proof stack creates (FileDigest, ../proof/managed-file.ts), so the
// toolchain proof can show a mandatory violation stopping preview and up.
import { PolicyPack } from "@pulumi/policy";
import { digestPinned } from "./digest";

new PolicyPack("sparkform-proof", { policies: [digestPinned] });
