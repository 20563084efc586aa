// Every string that crosses a shell is quoted by quote.ts; here each hostile string goes
// through a real /bin/sh (dash on Debian) and bash, and through a real rsync's `-e`
// splitting, and must arrive as exactly the argv we meant.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  assertOperand,
  rsyncRshJoin,
  rsyncRshQuote,
  shJoin,
  shQuote,
  sshTokenEscape,
  UnsafeArgumentError,
} from "../../components/transport/quote";

const HOSTILE: string[] = [
  "",
  " ",
  "two words",
  "  leading and trailing  ",
  "it's",
  "'",
  "''",
  "'\\''",
  '"double"',
  '"',
  "$(id)",
  "$(touch /tmp/sparkform-pwned)",
  "`id`",
  "${HOME}",
  "$HOME",
  "$",
  "a;b",
  "; rm -rf /",
  "a && b",
  "a || b",
  "a | b",
  "a & b",
  "a > /tmp/x",
  "< /etc/passwd",
  "line1\nline2",
  "\n",
  "trailing newline\n",
  "\r\n",
  "tab\there",
  "\t",
  "*",
  "*.txt",
  "?",
  "[abc]",
  "{a,b}",
  "~",
  "~root",
  "=ls",
  "-",
  "--",
  "-rf",
  "--delete",
  "-oProxyCommand=touch /tmp/pwned",
  "back\\slash",
  "\\",
  "\\n",
  "!",
  "!!",
  "#comment",
  "a#b",
  "%h:%p",
  "ünïcödé",
  "日本語",
  "emoji 🚀",
  "\u00a0nbsp",
  "\u001b[31mred\u001b[0m",
  "\u0001\u0002\u007f",
  "a=b c=d",
  "x".repeat(5000),
];

// A deterministic generated table on top of the hand-written one (no fast-check here).
function generated(count: number, seed: number): string[] {
  const alphabet = [
    "a",
    "Z",
    "0",
    " ",
    "'",
    '"',
    "\\",
    "$",
    "`",
    "(",
    ")",
    ";",
    "&",
    "|",
    "\n",
    "\t",
    "*",
    "?",
    "[",
    "]",
    "{",
    "}",
    "~",
    "-",
    "=",
    "#",
    "!",
    "%",
    "é",
    "🚀",
    "<",
    ">",
  ];
  let s = seed >>> 0;
  const rnd = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const len = Math.floor(rnd() * 12);
    let str = "";
    for (let j = 0; j < len; j++) str += alphabet[Math.floor(rnd() * alphabet.length)];
    out.push(str);
  }
  return out;
}

const ALL = [...HOSTILE, ...generated(300, 4)];

/** Run `<shell> -c "printf '%s\0' <quoted args>"` and split the NUL-separated argv back. */
function roundTrip(shell: string, argv: string[]): string[] {
  const out = execFileSync(shell, ["-c", `printf '%s\\0' ${argv.map(shQuote).join(" ")}`], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    env: { PATH: "/usr/bin:/bin", HOME: "/nonexistent" },
  });
  const parts = out.split("\0");
  expect(parts.pop()).toBe("");
  return parts;
}

describe("shQuote", () => {
  for (const shell of ["/bin/sh", "/bin/bash"]) {
    it(`round-trips every hostile and generated string through ${shell} -c`, () => {
      // One process for all strings, then each alone (catches interference between words).
      expect(roundTrip(shell, ALL)).toEqual(ALL);
      for (const s of HOSTILE) expect(roundTrip(shell, [s])).toEqual([s]);
    });
  }

  it("executes nothing: command substitution inside an argument stays text", () => {
    const marker = path.join(os.tmpdir(), `sf-pwned-${process.pid}`);
    roundTrip("/bin/sh", [`$(touch ${marker})`, `\`touch ${marker}\``, `; touch ${marker}`]);
    expect(fs.existsSync(marker)).toBe(false);
  });

  it("leaves plain words readable and quotes the rest", () => {
    expect(shQuote("spark-1")).toBe("spark-1");
    expect(shQuote("/usr/local/cuda/bin")).toBe("/usr/local/cuda/bin");
    expect(shQuote("")).toBe("''");
    expect(shQuote("it's")).toBe(`'it'\\''s'`);
    expect(shQuote("=ls")).toBe("'=ls'"); // zsh expands an unquoted leading "="
    expect(shQuote("~")).toBe("'~'");
    expect(shJoin(["echo", "a b", "$x"])).toBe("echo 'a b' '$x'");
  });

  it("refuses NUL, which no argv can carry", () => {
    expect(() => shQuote("a\0b")).toThrow(/NUL/);
    expect(() => shJoin([])).toThrow(/empty argv/);
  });
});

describe("rsyncRshQuote (rsync's -e splitter, not a shell)", () => {
  const words = HOSTILE.filter((s) => !/[\n\r]/.test(s)).concat(
    generated(200, 9).filter((s) => !/[\n\r]/.test(s)),
  );

  it("round-trips through a real rsync -e", () => {
    // rsync runs the -e program with the words it split, then `host rsync --server …`;
    // our fake "ssh" records its argv and fails, which is all we need.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sf-rsh-"));
    const fake = path.join(dir, "fake ssh's");
    const log = path.join(dir, "argv");
    fs.writeFileSync(fake, `#!/bin/sh\nprintf '%s\\0' "$@" > "$SF_ARGV_LOG"\nexit 1\n`, {
      mode: 0o755,
    });
    // rsync limits the number of words it passes on ("argc overflow" at about 130 words in all), so in chunks.
    try {
      for (let i = 0; i < words.length; i += 30) {
        const chunk = words.slice(i, i + 30);
        fs.rmSync(log, { force: true });
        try {
          execFileSync("rsync", ["-e", rsyncRshJoin([fake, ...chunk]), "--", "dummyhost:x", dir], {
            env: { PATH: "/usr/bin:/bin", SF_ARGV_LOG: log },
            stdio: ["ignore", "ignore", "pipe"],
          });
        } catch {
          // expected: the fake ssh exits 1
        }
        const got = fs.readFileSync(log, "utf8").split("\0");
        expect(got.slice(0, chunk.length)).toEqual(chunk);
        expect(got[chunk.length]).toBe("dummyhost");
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("doubles quotes instead of shell escapes, and refuses newlines", () => {
    expect(rsyncRshQuote("it's")).toBe("'it''s'");
    expect(rsyncRshQuote("UserKnownHostsFile=/tmp/sf-x/kh")).toBe(
      "'UserKnownHostsFile=/tmp/sf-x/kh'",
    );
    expect(() => rsyncRshQuote("a\nb")).toThrow(UnsafeArgumentError);
  });
});

describe("assertOperand (the leading-dash rule for ssh/rsync operands)", () => {
  it.each(["-oProxyCommand=sh", "--rsh=sh", "-", "-e", "--"])("rejects %j", (s) => {
    expect(() => assertOperand(s, 'node "spark-1" host')).toThrow(
      `node "spark-1" host ${JSON.stringify(s)} starts with "-", so ssh/rsync would read it as an option`,
    );
  });
  it.each(["", "a\nb", "a\rb", "a\0b"])("rejects empty, line breaks and NUL: %j", (s) => {
    expect(() => assertOperand(s, "rsync source")).toThrow(UnsafeArgumentError);
  });
  it.each(["spark-1", "192.168.100.10", "./-rf", "/home/spark/src dir", "a-b"])(
    "accepts %j",
    (s) => {
      expect(assertOperand(s, "x")).toBe(s);
    },
  );
});

it("sshTokenEscape doubles % for ssh_config token expansion", () => {
  expect(sshTokenEscape("/tmp/100%/x %h")).toBe("/tmp/100%%/x %%h");
});
