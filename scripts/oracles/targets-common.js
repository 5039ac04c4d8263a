// What scripts/oracles/js-targets, ts-targets and java-targets share: their command
// line, the parsers' folder from scripts/env/node-env, and posrecall's naming and
// eligibility rules (docs/METHOD.md section 2) applied to the functions a
// parser found. Each script only walks its own parser's tree.
"use strict";
const path = require("path");
const { execFileSync } = require("child_process");

// `SCRIPT [--anchor header] FILE [LINES]` or `SCRIPT [--anchor header] --each LINES FILE...`.
function parseArgs(script) {
  let args = process.argv.slice(2);
  let anchor = "name";
  if (args[0] === "--anchor") {
    anchor = args[1];
    args = args.slice(2);
  }
  let want, files, each = false;
  if (args[0] === "--each") {
    [want, files, each] = [Number(args[1]), args.slice(2), true];
  } else {
    [want, files] = [Number(args[1] || 20), args.slice(0, 1)];
  }
  if (files.length === 0 || !(want >= 1) || !["name", "header"].includes(anchor)) {
    console.error(`usage: scripts/oracles/${script} [--anchor name|header] FILE [LINES] | [--anchor name|header] --each LINES FILE...`);
    process.exit(2);
  }
  return { want, files, each, anchor };
}

// The node_modules folder scripts/env/node-env keeps the pinned parsers in.
function modules() {
  return execFileSync(path.join(__dirname, "..", "env", "node-env"), { encoding: "utf8" }).trim();
}

// Prints the targets among `found` ({name, qualified, start, open, close,
// definition}: offsets of the declaration, its body's `{` and its `}` in
// `text`; `definition` when only a header identifies it), one JSON object
// each, in source order: named by the bare name when no other function has
// it, else by the qualified name when that is unique; eligible when at least
// `want` lines lie strictly between the `{` line and the `}` line. Lines end
// at "\n" only; a "\r" before it is not part of the line (docs/METHOD.md
// section 1). With `file`, each object names it.
//
// With `anchor` "header" (docs/METHOD.md section 2, asking by the header),
// definitions count too, and a function whose names are all shared is still
// a target when its header (the text from the start of its first line
// through the `{`, verbatim) is no other function's: named NAME@LINE, and
// each object carries its header. Without it definitions are left out.
function printTargets(text, found, want, file, anchor = "name") {
  if (anchor !== "header") found = found.filter((f) => !f.definition);
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === "\n") starts.push(i + 1);
  const lineOf = (offset) => {
    let lo = 0, hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= offset) lo = mid; else hi = mid - 1;
    }
    return lo;
  };
  const lines = text.split("\n").map((l) => l.replace(/\r$/, ""));
  for (const f of found) {
    f.header = text.slice(starts[lineOf(f.start)], f.open + 1).replace(/^\uFEFF/, "").replace(/\r\n/g, "\n");
  }
  const count = (key, value) => found.filter((f) => f[key] === value).length;
  for (const f of [...found].sort((a, b) => a.start - b.start)) {
    let name = null;
    if (count("name", f.name) === 1) name = f.name;
    else if (f.qualified !== f.name && count("qualified", f.qualified) === 1) name = f.qualified;
    else if (anchor === "header" && count("header", f.header) === 1) name = `${f.name}@${lineOf(f.start) + 1}`;
    if (name === null) continue;
    const open = lineOf(f.open);
    if (lineOf(f.close) - open - 1 < want) continue;
    const t = { name, line: lineOf(f.start) + 1, expected: lines.slice(open + 1, open + 1 + want) };
    if (anchor === "header") t.header = f.header;
    console.log(JSON.stringify(file ? { file, ...t } : t));
  }
}

module.exports = { parseArgs, modules, printTargets };
