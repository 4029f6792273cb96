// tests/browser/normd_js.test.mjs -- web/normd.js, the JavaScript client,
// under Node against a live daemon (build/normd on an ephemeral port):
// every operation once, each answer checked against a naive reference
// computed here (forward norms), against central differences of the
// forward through the daemon (every backward), or against another route
// (moments and merge); typed arrays in and out per dtype; problem details
// as normd.Error; the ES-module wrapper. No packages: node:test.
//
// Usage: node --test tests/browser/normd_js.test.mjs   (NORMD_BIN as in run.mjs)

import assert from "node:assert/strict";
import {spawn} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {after, before, test} from "node:test";
import {fileURLToPath} from "node:url";

import normd from "../../web/normd.js";
import * as wrapper from "../../web/normd.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const NORMD_BIN = path.resolve(REPO, process.env.NORMD_BIN || "build/normd");

let daemon, base, c;
before(async () => {
  assert.ok(fs.existsSync(NORMD_BIN), `${NORMD_BIN} does not exist: make build/normd`);
  daemon = spawn(NORMD_BIN, ["--port", "0", "--host", "127.0.0.1", "--config", "config/normd.json"],
    {cwd: REPO, stdio: ["ignore", "ignore", "pipe"]});
  base = await new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error(`normd did not start:\n${buf}`)), 10000);
    daemon.stderr.on("data", (d) => {
      buf += d;
      const m = buf.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    daemon.on("exit", (code) => reject(new Error(`normd exited (${code}):\n${buf}`)));
  });
  c = normd.client(base);
});
after(() => daemon.kill("SIGTERM"));

// ---------------------------------------------------------------- helpers

// A reproducible pseudo-random Float64Array (mulberry32).
function randn(n, seed) {
  let a = seed >>> 0;
  const u = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return Float64Array.from({length: n}, () => Math.sqrt(-2 * Math.log(u() + 1e-12)) * Math.cos(2 * Math.PI * u()));
}
const shaped = (array, shape) => Object.assign(array, {shape});

function close(got, want, tol, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++)
    assert.ok(Math.abs(got[i] - want[i]) <= tol * (1 + Math.abs(want[i])), `${what}[${i}]: got ${got[i]}, want ${want[i]}`);
}

// y = (x - mean) / sqrt(var + eps) over groups of indices (a naive reference)
function normalizeGroups(x, groups, eps) {
  const y = new Float64Array(x.length);
  for (const idx of groups) {
    const mean = idx.reduce((s, i) => s + x[i], 0) / idx.length;
    const v = idx.reduce((s, i) => s + (x[i] - mean) ** 2, 0) / idx.length;
    for (const i of idx) y[i] = (x[i] - mean) / Math.sqrt(v + eps);
  }
  return y;
}
// the flat indices of (N, C, S) grouped by pick(n, c) -> group key
function groupIndices([N, C, S], key) {
  const groups = new Map();
  for (let n = 0; n < N; n++) for (let ch = 0; ch < C; ch++) for (let s = 0; s < S; s++) {
    const k = key(n, ch);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push((n * C + ch) * S + s);
  }
  return [...groups.values()];
}

const SHAPE = [2, 4, 3];
const X = shaped(randn(24, 7), SHAPE);

// ------------------------------------------------------------------ tests

test("the client's operations are the daemon's /v1 routes", async () => {
  const info = await c.info();
  const served = info.routes.filter((r) => r.methods.startsWith("POST") && r.path.startsWith("/v1/")).map((r) => r.path);
  assert.deepEqual(normd.operations.map((o) => o.route).sort(), served.sort());
  for (const o of normd.operations) assert.equal(typeof c[o.method], "function", o.method);
});

test("layerNorm: nested arrays in, Float32Array out, against a naive reference", async () => {
  const rows = [[1, 2, 3, 4], [10, 0, -3, 2.5]];
  const r = await c.layerNorm(rows, {eps: 1e-5});
  assert.ok(r.output instanceof Float32Array);
  assert.deepEqual(r.output.shape, [2, 4]);
  assert.equal(r.output.dtype, "float32");
  assert.ok(r.stats.mean instanceof Float64Array);
  close(r.output, normalizeGroups(rows.flat(), [[0, 1, 2, 3], [4, 5, 6, 7]], 1e-5), 1e-6, "output");
  close(r.stats.mean, [2.5, 2.375], 1e-6, "mean");
});

test("rmsNorm: a flat Float64Array with a shape, Float64Array out", async () => {
  const x = randn(12, 3);
  const r = await c.rmsNorm(x, {shape: [3, 4], weight: Float64Array.from([1, 2, 3, 4])});
  assert.ok(r.output instanceof Float64Array);
  assert.deepEqual(r.output.shape, [3, 4]);
  const want = new Float64Array(12);
  for (let row = 0; row < 3; row++) {
    const ms = [0, 1, 2, 3].reduce((s, j) => s + x[row * 4 + j] ** 2, 0) / 4;
    for (let j = 0; j < 4; j++) want[row * 4 + j] = (j + 1) * x[row * 4 + j] / Math.sqrt(ms + 1e-6);
  }
  close(r.output, want, 1e-12, "output");
});

test("batchNorm, groupNorm, instanceNorm against naive references", async () => {
  const batch = await c.batchNorm(X, {running_mean: new Float64Array(4), running_var: Float64Array.from([1, 1, 1, 1])});
  close(batch.output, normalizeGroups(X, groupIndices(SHAPE, (n, ch) => ch), 1e-5), 1e-12, "batch");
  assert.ok(batch.running_mean instanceof Float64Array || batch.running_mean instanceof Float32Array, "running_mean updated");
  const group = await c.groupNorm(X, {numGroups: 2});
  close(group.output, normalizeGroups(X, groupIndices(SHAPE, (n, ch) => `${n},${ch >> 1}`), 1e-5), 1e-12, "group");
  const instance = await c.instanceNorm(X);
  close(instance.output, normalizeGroups(X, groupIndices(SHAPE, (n, ch) => `${n},${ch}`), 1e-5), 1e-12, "instance");
  assert.deepEqual(instance.stats.shape, [2, 4]);
});

test("lpNorm, lrn and mvn against naive references", async () => {
  const lp = await c.lpNorm(X, {p: 2});
  const rows = groupIndices([8, 1, 3], (n) => n);
  const wantLp = new Float64Array(24);
  for (const idx of rows) {
    const norm = Math.sqrt(idx.reduce((s, i) => s + X[i] ** 2, 0));
    for (const i of idx) wantLp[i] = X[i] / norm;
  }
  close(lp.output, wantLp, 1e-12, "lp");
  // torch's local_response_norm: x / (k + alpha / size * sum of x^2 over
  // the channel window [c - size/2, c + (size-1)/2])^beta
  const [N, C, S] = SHAPE, size = 3, alpha = 0.5, beta = 0.75, k = 2;
  const lrn = await c.lrn(X, {size, alpha, beta, k});
  const wantLrn = new Float64Array(24);
  for (let n = 0; n < N; n++) for (let ch = 0; ch < C; ch++) for (let s = 0; s < S; s++) {
    let sq = 0;
    for (let j = ch - Math.floor(size / 2); j <= ch + Math.floor((size - 1) / 2); j++)
      if (j >= 0 && j < C) sq += X[(n * C + j) * S + s] ** 2;
    const i = (n * C + ch) * S + s;
    wantLrn[i] = X[i] / (k + alpha / size * sq) ** beta;
  }
  close(lrn.output, wantLrn, 1e-12, "lrn");
  // mvn: (x - mean) / (std + eps) over the axes
  const mvn = await c.mvn(X, {axes: [0, 2], eps: 0});
  close(mvn.output, normalizeGroups(X, groupIndices(SHAPE, (n, ch) => ch), 0), 1e-12, "mvn");
});

// Every backward against central differences of its forward through the
// daemon: grad_input[i] = d/dx_i sum(g * f(x)), float64 throughout.
const BACKWARDS = [
  ["layer", {weight: Float64Array.from([1, 0.5, 2])}],
  ["rms", {weight: Float64Array.from([1, 0.5, 2])}],
  ["batch", {}],
  ["group", {num_groups: 2}],
  ["instance", {}],
  ["lp", {p: 3}],
  ["lrn", {size: 3, alpha: 0.5, beta: 0.75, k: 2}],
  ["mvn", {axes: [1, 2]}],
];
const method = (name) => ({layer: "layerNorm", rms: "rmsNorm", batch: "batchNorm", group: "groupNorm",
  instance: "instanceNorm", lp: "lpNorm", lrn: "lrn", mvn: "mvn"})[name];
for (const [name, options] of BACKWARDS) {
  test(`${method(name)}Backward agrees with central differences of ${method(name)}`, async () => {
    const g = shaped(randn(24, 11), SHAPE);
    const r = await c[`${method(name)}Backward`](X, g, options);
    assert.ok(r.grad_input instanceof Float64Array);
    assert.deepEqual(r.grad_input.shape, SHAPE);
    const loss = async (x) => {
      const y = (await c[method(name)](x, options)).output;
      return y.reduce((s, v, i) => s + v * g[i], 0);
    };
    const h = 1e-6;
    for (const i of [0, 5, 13, 23]) {
      const plus = shaped(Float64Array.from(X), SHAPE), minus = shaped(Float64Array.from(X), SHAPE);
      plus[i] += h;
      minus[i] -= h;
      const numeric = ((await loss(plus)) - (await loss(minus))) / (2 * h);
      assert.ok(Math.abs(r.grad_input[i] - numeric) <= 1e-5 * (1 + Math.abs(numeric)),
        `grad_input[${i}]: ${r.grad_input[i]} vs ${numeric}`);
    }
    // the same method through the generic entry point
    const again = await c.normBackward(name, X, g, options);
    assert.deepEqual(Array.from(again.grad_input), Array.from(r.grad_input));
  });
}

test("moments and mergeMoments: two halves merge into the whole", async () => {
  const x = shaped(randn(16, 5), [4, 4]);
  const whole = await c.moments(x);
  const first = await c.moments(shaped(x.slice(0, 8), [2, 4]), {axis: 0});
  const second = await c.moments(shaped(x.slice(8), [2, 4]), {axis: 0});
  const columns = await c.moments(x, {axis: 0});
  const merged = await c.mergeMoments([first, second]);
  assert.ok(merged.mean instanceof Float64Array);
  close(merged.mean, columns.mean, 1e-12, "mean");
  close(merged.var, columns.var, 1e-12, "var");
  close(whole.mean, [0, 1, 2, 3].map((r) => [0, 1, 2, 3].reduce((s, j) => s + x[r * 4 + j], 0) / 4), 1e-12, "row means");
});

test("simulateResidual: curves as Float64Array, the same as the raw request", async () => {
  const options = {layers: 6, tokens: 4, d: 16, seed: 3, gradients: true};
  const r = await c.simulateResidual(options);
  const raw = await c.request("POST", "/v1/residual/simulate", options);
  assert.ok(r.pre.rms instanceof Float64Array);
  assert.equal(r.pre.rms.length, 7);
  close(r.post.rms, raw.post.rms, 0, "post rms");
  assert.equal(r.layers, 6);
});

test("float16 and bfloat16 answers are Float32Array; non-finite values both ways", async () => {
  for (const dtype of ["float16", "bfloat16"]) {
    const r = await c.layerNorm(Float32Array.from([1, 2, 3, 4]), {dtype});
    assert.equal(r.output.dtype, dtype);
    assert.ok(r.output instanceof Float32Array);
    close(r.output, normalizeGroups([1, 2, 3, 4], [[0, 1, 2, 3]], 1e-5), 1e-2, dtype);
  }
  const r = await c.layerNorm(Float64Array.from([1, NaN, 3, 4, 5, 6]), {shape: [2, 3]});
  assert.ok(r.output.slice(0, 3).every(Number.isNaN));
  assert.ok(Number.isNaN(r.stats.mean[0]));
  close(r.output.slice(3), normalizeGroups([4, 5, 6], [[0, 1, 2]], 1e-5), 1e-12, "finite row");
});

test("errors are normd.Error with the problem's status, code, detail and field", async () => {
  await assert.rejects(c.groupNorm(X, {num_groups: 3}), (e) => {
    assert.ok(e instanceof normd.Error);
    assert.equal(e.status, 422);
    assert.equal(e.code, "bad_num_groups");
    assert.equal(e.field, "num_groups");
    assert.match(e.detail, /divide/);
    return true;
  });
  await assert.rejects(c.layerNorm([1, 2], {epsilon: 1}), (e) => e.code === "unknown_field" && e.field === "epsilon");
  await assert.rejects(c.request("GET", "/nowhere"), (e) => e.status === 404 && e.code === "not_found");
  await assert.rejects(normd.client("http://127.0.0.1:9").info(), (e) => e.status === 0 && e.code === "unreachable");
  // a daemon that never answers: the client gives up after its timeout
  const silent = normd.client(base, {timeout: 50, fetch: (url, init) => new Promise((resolve, reject) => {
    init.signal.addEventListener("abort", () => reject(new Error("aborted")));
  })});
  await assert.rejects(silent.info(), (e) => e.status === 0 && e.code === "timeout");
});

test("apiKey is sent as a bearer token; hooks see every exchange", async () => {
  const seen = [];
  const keyed = normd.client(base, {
    apiKey: "s3cret",
    fetch: (url, init) => { seen.push(init.headers.Authorization); return fetch(url, init); },
    onrequest: (e) => seen.push(`start ${e.method} ${e.path}`),
    onresponse: (e) => seen.push(`done ${e.status}`),
  });
  await keyed.info();
  assert.deepEqual(seen, ["start GET /v1/info", "Bearer s3cret", "done 200"]);
});

test("normd.mjs exports the same client", () => {
  assert.equal(wrapper.default, normd);
  assert.equal(wrapper.client, normd.client);
  assert.equal(wrapper.NormdError, normd.Error);
});

// README.md's JavaScript client block runs against the daemon and prints
// what its comments say, line for line.
test("the README's JavaScript block prints what it says", async () => {
  const readme = fs.readFileSync(path.join(REPO, "README.md"), "utf8");
  const section = readme.match(/^## JavaScript client\n([\s\S]*?)^## /m);
  assert.ok(section, "README.md has no '## JavaScript client' section");
  const block = section[1].match(/^```js\n([\s\S]*?)^```/m);
  assert.ok(block, "no js block");
  const code = block[1].replace('"./web/normd.js"', JSON.stringify(path.join(REPO, "web/normd.js")))
    .replace("http://localhost:8080", base);
  const want = block[1].split("\n").map((l) => l.trim()).filter((l) => /^\/\/ /.test(l)).map((l) => l.slice(3));
  const run = spawn(process.execPath, ["--input-type=module", "-e", code], {stdio: ["ignore", "pipe", "pipe"]});
  let out = "", err = "";
  run.stdout.on("data", (d) => { out += d; });
  run.stderr.on("data", (d) => { err += d; });
  const status = await new Promise((resolve) => run.on("exit", resolve));
  assert.equal(status, 0, err);
  assert.deepEqual(out.trim().split("\n"), want);
});
