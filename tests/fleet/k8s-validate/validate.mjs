// Validate Kubernetes manifests offline against the API schema, with the
// model classes of the kubernetes-models package (JSON schemas generated
// from Kubernetes' OpenAPI document) and js-yaml.
//
//   node validate.mjs --modules DIR FILE|- ...
//
// DIR holds node_modules (npm ci of this directory's package-lock.json,
// kept outside the tree by tests/fleet/k8s.sh). Every YAML document of every
// FILE ("-": standard input) is validated with the class for its
// apiVersion and kind; a document without them, of an unknown apiVersion or
// kind, or that the schema rejects fails. Prints one line per document,
// "ok FILE#N KIND/NAME" or "invalid FILE#N KIND/NAME: WHY", and exits 0
// only when every document is valid (1 otherwise, 2 on bad usage).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const args = process.argv.slice(2);
const at = args.indexOf("--modules");
if (at < 0 || at + 1 >= args.length) {
  console.error("usage: node validate.mjs --modules DIR FILE|- ...");
  process.exit(2);
}
const modules = args[at + 1];
const files = args.filter((_, i) => i !== at && i !== at + 1);
if (files.length === 0) {
  console.error("validate.mjs: no manifest given");
  process.exit(2);
}
// Resolve the packages from DIR, not from this file's directory.
const require = createRequire(join(modules, "package.json"));
const yaml = require("js-yaml");

// "v1" -> kubernetes-models/v1, "apps/v1" -> kubernetes-models/apps/v1.
function modelClass(apiVersion, kind) {
  if (typeof apiVersion !== "string" || !/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion)) {
    throw new Error(`apiVersion ${JSON.stringify(apiVersion)} is not a Kubernetes group/version`);
  }
  let mod;
  try {
    mod = require(`kubernetes-models/${apiVersion}`);
  } catch {
    throw new Error(`unknown apiVersion ${apiVersion}`);
  }
  const cls = typeof kind === "string" ? mod[kind] : undefined;
  if (typeof cls !== "function" || cls.kind !== kind || cls.apiVersion !== apiVersion) {
    throw new Error(`unknown kind ${JSON.stringify(kind)} in ${apiVersion}`);
  }
  return cls;
}

let bad = 0;
for (const file of files) {
  const label = file === "-" ? "<stdin>" : file;
  let docs;
  try {
    docs = yaml.loadAll(readFileSync(file === "-" ? 0 : file, "utf8"));
  } catch (e) {
    console.log(`invalid ${label}: YAML: ${e.message.split("\n")[0]}`);
    bad++;
    continue;
  }
  let n = 0;
  for (const doc of docs) {
    if (doc === null || doc === undefined) {
      continue; // an empty document (a trailing "---")
    }
    n++;
    const what = `${label}#${n} ${doc?.kind ?? "?"}/${doc?.metadata?.name ?? "?"}`;
    try {
      if (typeof doc !== "object" || Array.isArray(doc)) {
        throw new Error("not a mapping");
      }
      const Model = modelClass(doc.apiVersion, doc.kind);
      new Model(doc).validate();
      console.log(`ok ${what}`);
    } catch (e) {
      console.log(`invalid ${what}: ${e.message.replace(/\s+/g, " ").slice(0, 400)}`);
      bad++;
    }
  }
  if (n === 0) {
    console.log(`invalid ${label}: no Kubernetes object in it`);
    bad++;
  }
}
process.exit(bad === 0 ? 0 : 1);
