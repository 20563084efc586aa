// A stage's `config:` takes only a Validated section, which parseStackConfig alone hands out
// (components/stack-config.ts). A test that makes one stage alone, from a section it parsed
// with that section's own schema (and no whole stack around it), brands it here: the test
// vouches for the section, as parseStackConfig's cross-checks would have in a program.
import { brandValidated, type Validated } from "../../components/config/descriptor";

/** `section`, which the test parsed with its own schema, as a stage's `config:` takes it. */
export const asValidated = <T>(section: T): Validated<T> => brandValidated(section);
