// Validates Kubernetes objects (a JSON array on stdin) against the upstream
// OpenAPI schema compiled into the npm package kubernetes-models (found via
// NODE_PATH). Prints one line per object; exits 1 if any is invalid.
"use strict";

const fs = require("fs");

const items = JSON.parse(fs.readFileSync(0, "utf8"));
let bad = 0;
const seen = [];
for (const obj of items) {
  const [group, version] = obj.apiVersion.includes("/")
    ? obj.apiVersion.split("/")
    : ["", obj.apiVersion];
  const dir = group === "" ? version : `${group}/${version}`;
  const name = `${obj.kind}/${obj.metadata.name}`;
  let Model;
  try {
    Model = require(`kubernetes-models/${dir}/${obj.kind}`)[obj.kind];
  } catch (e) {
    console.log(`${name}: no schema for ${obj.apiVersion} ${obj.kind}`);
    bad++;
    continue;
  }
  try {
    new Model(obj).validate();
    seen.push(name);
  } catch (e) {
    console.log(`${name}: ${e.message}`);
    bad++;
  }
}
const pkg = require("kubernetes-models/package.json");
if (bad === 0) console.log(`kubernetes-models ${pkg.version}: ${seen.join(", ")} valid`);
process.exit(bad ? 1 : 0);
