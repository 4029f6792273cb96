#!/usr/bin/env node
// client.js -- normd from Node.js (18 or later: the built-in fetch), no
// packages. A layer norm as JSON, then a batch norm training step in the
// binary framing (a JSON header, then raw little-endian float32 tensors),
// printed and checked.
//
//   node examples/client.js                     # a daemon on localhost:8080
//   NORMD_URL=http://host:9000 node examples/client.js
//   NORMD_API_KEY=... node examples/client.js   # when the daemon has API keys
'use strict';

const URL_BASE = (process.env.NORMD_URL || 'http://localhost:8080').replace(/\/$/, '');
const AUTH = process.env.NORMD_API_KEY
  ? { Authorization: `Bearer ${process.env.NORMD_API_KEY}` } : {};

// POSTs and returns the Response; an error answer (RFC 9457 problem details)
// is thrown with its code.
async function post(path, body, headers) {
  const resp = await fetch(URL_BASE + path, {
    method: 'POST', body, headers: { ...AUTH, ...headers },
  });
  if (!resp.ok) {
    const problem = await resp.json().catch(() => ({}));
    throw new Error(`normd said ${resp.status} ${problem.code}: ${problem.detail}`);
  }
  return resp;
}

// The binary framing: the JSON header (tensors say their byte size in
// parameters.binary_data_size instead of data), then their bytes in order.
function frame(header, tensors) {
  const json = Buffer.from(JSON.stringify(header));
  const parts = tensors.map((t) => Buffer.from(t.buffer, t.byteOffset, t.byteLength));
  return { body: Buffer.concat([json, ...parts]), headerLength: json.length };
}

// Splits a framed answer into its JSON header and a Float32Array per binary
// tensor (in header order: output, then running_mean and running_var).
async function unframe(resp) {
  const n = Number(resp.headers.get('inference-header-content-length'));
  const bytes = Buffer.from(await resp.arrayBuffer());
  const header = JSON.parse(bytes.subarray(0, n).toString('utf8'));
  let pos = n;
  const take = (t) => {
    const size = t.parameters.binary_data_size;
    // copy: a Float32Array needs a 4-byte aligned offset
    const out = new Float32Array(bytes.buffer.slice(bytes.byteOffset + pos,
      bytes.byteOffset + pos + size));
    pos += size;
    return out;
  };
  const tensors = {};
  for (const name of ['output', 'running_mean', 'running_var']) {
    if (header[name] && header[name].parameters) tensors[name] = take(header[name]);
  }
  return { header, tensors };
}

// float32 values as the short decimals normd's JSON answers use
const short = (a) => JSON.stringify(Array.from(a, (v) => Number(v.toPrecision(8))));

function close(got, want, what) {
  got.forEach((g, i) => {
    if (Math.abs(g - want[i]) > 1e-5 * Math.max(1, Math.abs(want[i]))) {
      throw new Error(`${what}[${i}] = ${g}, expected ${want[i]}`);
    }
  });
}

async function main() {
  // 1. JSON: the textbook layer norm
  const x = [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]];
  const resp = await post('/v1/norm/layer', JSON.stringify({ input: x }),
    { 'Content-Type': 'application/json' });
  const answer = await resp.json();
  console.log('layer norm (JSON):', JSON.stringify(answer.output.data));
  console.log('  mean', short(answer.stats.mean), 'var', short(answer.stats.var),
    'rstd', short(answer.stats.rstd));
  close(answer.stats.mean, [3, 6], 'mean');
  close(answer.stats.var, [2, 8], 'var');

  // 2. Binary framing: a batch norm training step, 3 samples x 2 channels,
  // with running statistics to update; every tensor travels as float32
  const input = Float32Array.from([1, 2, 3, 4, 5, 9]);
  const runningMean = Float32Array.from([0, 0]);
  const runningVar = Float32Array.from([1, 1]);
  const binary = (shape, t) => ({ shape, dtype: 'float32', parameters: { binary_data_size: t.byteLength } });
  const { body, headerLength } = frame({
    input: binary([3, 2], input),
    running_mean: binary([2], runningMean),
    running_var: binary([2], runningVar),
    momentum: 0.1,
  }, [input, runningMean, runningVar]);
  const framed = await unframe(await post('/v1/norm/batch', body, {
    'Content-Type': 'application/octet-stream',
    'Inference-Header-Content-Length': String(headerLength),
  }));
  console.log('batch norm (binary framing): output', short(framed.tensors.output));
  console.log('  batch mean', short(framed.header.stats.mean), 'var', short(framed.header.stats.var));
  console.log('  running_mean', short(framed.tensors.running_mean),
    'running_var', short(framed.tensors.running_var),
    'num_batches_tracked', framed.header.num_batches_tracked);
  close(Array.from(framed.tensors.running_mean), [0.3, 0.5], 'running_mean');
  close(Array.from(framed.tensors.running_var), [1.3, 2.2], 'running_var');
  console.log('client.js: ok');
}

main().catch((err) => {
  console.error('client.js:', err.message);
  process.exit(1);
});
