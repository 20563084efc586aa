// The program SparkNode runs on a node (native/node/).
export const FACTS_PROGRAM = "node/facts.sh";
