// A pure helper of the kinds' state upgrades: older sparkform recorded a program's whole text
// where state now holds a ProgramRef.
import { type ProgramRef, sha256Hex } from "../native-script";

/**
 * The ProgramRef for a program text recorded before refs. The diff compares refs by sha256
 * only (sameProgram), so the ref equals the text it replaces; `name` is the program the
 * provider falls back to for such state today (programFor).
 */
export function programRefOfText(name: string, text: string): ProgramRef {
  return { name, sha256: sha256Hex(text) };
}
