// The program ModelReplica runs on a node (native/model/), and what a resource records of it.
import { nativeProgram, programPath } from "../native-script";

export const FETCH_PROGRAM = "model/model-fetch.py";
/** The checkout's file (the unit tests run it from there). */
export const FETCH_SCRIPT = programPath(FETCH_PROGRAM);

export function fetchScript(): string {
  return nativeProgram(FETCH_PROGRAM).text;
}

/** What ModelReplica records of the script (`scriptDigest`): a changed script is an update. */
export function fetchScriptDigest(): string {
  return nativeProgram(FETCH_PROGRAM).sha256;
}
