// The sparkform policy pack: `pulumi preview --policy-pack policies`.
import { PolicyPack } from "@pulumi/policy";
import { digestPinned } from "./digests";

new PolicyPack("sparkform", {
  policies: [digestPinned],
});
