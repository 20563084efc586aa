// Test program for test/e2e/model.test.ts: the main program's SparkCluster on a config subset
// (`sparkform:nodes`, `sparkform:model` and the secret `sparkform:hfToken`).
import { stackCluster } from "../../../components/stack";

const cluster = stackCluster(__dirname);
const m = cluster.model;
if (!m) throw new Error("this test program needs sparkform:model");

export const commit = m.commit;
export const files = m.files;
export const gguf = m.gguf;
export const modelNodes = m.nodes;
