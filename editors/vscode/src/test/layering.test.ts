// The layering and the package: the core and the webview never import `vscode` (only src/vscode/ does), and the
// extension bundle VS Code loads is CommonJS that needs nothing but `vscode` and Node's built-ins.

import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { builtinModules, createRequire } from "node:module";
import * as path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

test("src/core and src/webview import nothing from vscode", async () => {
  for (const folder of ["core", "webview"]) {
    for (const name of await readdir(path.join(root, "src", folder))) {
      const text = await readFile(path.join(root, "src", folder, name), "utf8");
      assert.doesNotMatch(text, /from\s+["']vscode["']|require\(["']vscode["']\)/, `${folder}/${name} imports vscode`);
    }
  }
});

test("dist/extension.cjs loads with only vscode and Node's built-ins, and exports activate and deactivate", () => {
  const require = createRequire(import.meta.url);
  const Module = require("node:module") as { prototype: { require: (id: string) => unknown } };
  const load = Module.prototype.require;
  const asked = new Set<string>();
  Module.prototype.require = function (this: unknown, id: string) {
    asked.add(id);
    return id === "vscode" ? {} : load.call(this, id); // nothing runs at load time: the API is not touched
  };
  try {
    const extension = require(path.join(root, "dist", "extension.cjs")) as Record<string, unknown>;
    assert.equal(typeof extension.activate, "function");
    assert.equal(typeof extension.deactivate, "function");
  } finally {
    Module.prototype.require = load;
  }
  const builtins = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)]);
  const optional = new Set(["bufferutil", "utf-8-validate"]); // ws's native speed-ups, tried and not required
  const bundle = path.join(root, "dist", "extension.cjs");
  assert.deepEqual([...asked].filter((id) => id !== "vscode" && id !== bundle && !builtins.has(id) && !optional.has(id)), []);
  assert.ok(asked.has("vscode"));
});
