#!/usr/bin/env node
// `npx getclaros <command>` is `claros <command>`: verify, login, guard, hooks install,
// hook, rules push, mappings push (docs/guard.md). The Claros client is a Python package;
// this launcher finds it and hands over the terminal, arguments and exit code unchanged.
//
// Where it looks, in order: $CLAROS_PYTHON (a Python with the client installed), a
// `claros` command on PATH, then python3 / python with the client importable.
"use strict";

const { spawnSync } = require("node:child_process");

const args = process.argv.slice(2);
const HELP =
  "getclaros: the Claros client is not installed.\n" +
  "Install it (Python 3.11+) with:  pipx install getclaros\n" +
  "                             or:  pip install getclaros\n" +
  "or set CLAROS_PYTHON to a Python that has it, then run npx getclaros again.\n";

function run(command, commandArgs) {
  const done = spawnSync(command, commandArgs, { stdio: "inherit" });
  if (done.error) {
    return done.error.code === "ENOENT" ? null : fail(`${command}: ${done.error.message}`);
  }
  if (done.signal) {
    process.kill(process.pid, done.signal);
  }
  return done.status === null ? 1 : done.status;
}

function hasClient(python) {
  const probe = spawnSync(python, ["-c", "import claros_guard.cli"], { stdio: "ignore" });
  return !probe.error && probe.status === 0;
}

function fail(message) {
  process.stderr.write(`getclaros: ${message}\n`);
  return 2;
}

function main() {
  const chosen = process.env.CLAROS_PYTHON;
  if (chosen) {
    if (!hasClient(chosen)) {
      return fail(`CLAROS_PYTHON=${chosen} cannot import the Claros client (claros_guard)`);
    }
    return run(chosen, ["-m", "claros_guard.cli", ...args]);
  }
  const direct = run("claros", args);
  if (direct !== null) {
    return direct;
  }
  for (const python of ["python3", "python"]) {
    if (hasClient(python)) {
      return run(python, ["-m", "claros_guard.cli", ...args]);
    }
  }
  process.stderr.write(HELP);
  return 2;
}

process.exitCode = main();
