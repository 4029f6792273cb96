/* normd.js -- normd's JavaScript client: one dependency-free file for
 * browsers and Node 18+ (the built-in fetch), one method per /v1
 * operation, typed arrays in and out, problem details thrown as
 * normd.Error. The teaching page (web/index.html) runs on it; the daemon
 * serves it at GET /normd.js (and the ES-module wrapper at /normd.mjs).
 *
 * One file, two module systems. A file cannot be both a classic script and
 * an ES module with exports (an `export` statement is a syntax error in a
 * classic script), so this file is a classic script with a UMD-style
 * ending (github.com/umdjs/umd, "returnExports"):
 *   - <script src="normd.js">: defines the global `normd`;
 *   - import "./normd.js" from an ES module: the same (it is valid module
 *     code too: strict, no top-level `this`), read globalThis.normd;
 *   - Node: require("./normd.js"), or import it (Node loads it as CommonJS:
 *     `import normd from ".../normd.js"`);
 *   - ES-module imports with names: web/normd.mjs (GET /normd.mjs) wraps
 *     this file: `import normd, {client} from ".../normd.mjs"`.
 *
 *   const c = normd.client("http://localhost:8080", {apiKey, timeout: 30000});
 *   const r = await c.layerNorm([[1, 2, 3], [4, 5, 7]], {eps: 1e-5});
 *   r.output        // Float32Array [-1.22, 0, 1.22, ...], r.output.shape [2, 3]
 *   r.stats.mean    // Float64Array [2, 5.33]
 */
(function (root, factory) {
  "use strict";
  const normd = factory();
  if (typeof module === "object" && module !== null && module.exports) module.exports = normd;
  else root.normd = normd;
})(typeof globalThis !== "undefined" ? globalThis : self, function () {
  "use strict";

  const VERSION = "0.1.0";

  /* The /v1 operations: [method, route, arguments]. Arguments: "x" takes
   * (x, options), "grad" takes (x, gradOutput, options), "parts" takes
   * (parts), "none" takes (options). The routes are server/ops.h's
   * OPS_MAP, which api/openapi.yaml documents; tests/browser/
   * normd_js.test.mjs checks this list against the daemon's /v1/info. */
  const OPERATIONS = [
    ["layerNorm", "/v1/norm/layer", "x"],
    ["rmsNorm", "/v1/norm/rms", "x"],
    ["batchNorm", "/v1/norm/batch", "x"],
    ["groupNorm", "/v1/norm/group", "x"],
    ["instanceNorm", "/v1/norm/instance", "x"],
    ["lpNorm", "/v1/norm/lp", "x"],
    ["lrn", "/v1/norm/lrn", "x"],
    ["mvn", "/v1/norm/mvn", "x"],
    ["layerNormBackward", "/v1/norm/layer/backward", "grad"],
    ["rmsNormBackward", "/v1/norm/rms/backward", "grad"],
    ["batchNormBackward", "/v1/norm/batch/backward", "grad"],
    ["groupNormBackward", "/v1/norm/group/backward", "grad"],
    ["instanceNormBackward", "/v1/norm/instance/backward", "grad"],
    ["lpNormBackward", "/v1/norm/lp/backward", "grad"],
    ["lrnBackward", "/v1/norm/lrn/backward", "grad"],
    ["mvnBackward", "/v1/norm/mvn/backward", "grad"],
    ["moments", "/v1/moments", "x"],
    ["mergeMoments", "/v1/moments/merge", "parts"],
    ["simulateResidual", "/v1/residual/simulate", "none"],
  ];

  /* The typed array that holds each dtype's values. float16 and bfloat16
   * values are all exact in float32, which is what JavaScript has
   * everywhere (Float16Array is not yet in every engine). */
  const ARRAY_OF_DTYPE = {float32: Float32Array, float64: Float64Array, float16: Float32Array, bfloat16: Float32Array};
  const dtypeOfArray = (a) => (a instanceof Float64Array ? "float64" : "float32");

  /* An answer that is not a success: the RFC 9457 problem details normd
   * sends (status, code, title, detail, field; retryAfter from Retry-After
   * on 503), or one the client makes when there is no answer (status 0,
   * code "unreachable" or "timeout"). `problem` is the whole document. */
  class NormdError extends Error {
    constructor(status, problem, path, retryAfter) {
      const p = problem || {};
      super(p.detail || p.title || `HTTP ${status}`);
      this.name = "NormdError";
      this.status = status;
      this.code = p.code || null;
      this.title = p.title || null;
      this.detail = p.detail || null;
      this.field = p.field || null;
      this.type = p.type || null;
      this.problem = p;
      this.path = path;
      this.retryAfter = retryAfter;
    }
  }

  /* JSON has no NaN or infinities: normd reads and writes them as the
   * strings "NaN", "Infinity", "-Infinity" (proto3 JSON's convention). */
  function writeNumber(key, v) {
    if (typeof v === "number" && !Number.isFinite(v)) return Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
    return v;
  }
  function readNumber(v) {
    if (typeof v === "number") return v;
    if (v === "NaN") return NaN;
    if (v === "Infinity") return Infinity;
    if (v === "-Infinity") return -Infinity;
    return v;
  }
  const isNumberLike = (v) => typeof v === "number" || v === "NaN" || v === "Infinity" || v === "-Infinity";
  const isTyped = (v) => ArrayBuffer.isView(v) && !(v instanceof DataView);

  /* A tensor as the request carries it, from: a typed array (its .shape,
   * as this client's answers set it, or `shape`, else 1-D; its dtype from
   * the array type unless `dtype` says), an object {shape, data, dtype}
   * (data plain or typed), or a nested array (sent as it is: normd infers
   * the shape). */
  function encodeTensor(x, shape, dtype) {
    if (isTyped(x)) {
      const dims = shape || x.shape || [x.length];
      return {shape: Array.from(dims), dtype: dtype || x.dtype || dtypeOfArray(x), data: Array.from(x)};
    }
    if (x && typeof x === "object" && !Array.isArray(x) && "data" in x) {
      const t = {shape: Array.from(x.shape || shape || [x.data.length]), data: Array.from(x.data)};
      if (x.dtype || dtype || isTyped(x.data)) t.dtype = x.dtype || dtype || dtypeOfArray(x.data);
      return t;
    }
    if (Array.isArray(x) && (shape || dtype)) {
      const data = x.flat(Infinity);
      return {shape: Array.from(shape || [data.length]), dtype: dtype || "float32", data};
    }
    return x;
  }

  /* The request body: the input (and grad_output) plus the options under
   * their API names (snake_case; camelCase is accepted: normalizedShape is
   * normalized_shape). Typed arrays among the options (weight, bias,
   * running_mean, ...) become 1-D tensors unless they carry a .shape. */
  function requestBody(tensors, options) {
    const {shape, dtype, ...fields} = options || {};
    const body = {};
    for (const [name, value] of Object.entries(tensors)) body[name] = encodeTensor(value, shape, dtype);
    for (const [key, value] of Object.entries(fields)) {
      if (value === undefined) continue;
      const name = key.replace(/[A-Z]/g, (m) => "_" + m.toLowerCase());
      body[name] = isTyped(value) || (value && typeof value === "object" && isTyped(value.data)) ? encodeTensor(value) : value;
    }
    return body;
  }

  /* An answer with typed arrays: each tensor {shape, dtype, data} becomes
   * a typed array of its dtype with .shape and .dtype set on it; every
   * other list of numbers (stats, moments, the residual experiment's
   * curves) becomes a Float64Array; "shape" lists and everything else stay
   * as they are. */
  function decodeAnswer(v, key) {
    if (Array.isArray(v)) {
      if (key !== "shape" && v.length > 0 && v.every(isNumberLike)) return Float64Array.from(v, readNumber);
      return v.map((item) => decodeAnswer(item, null));
    }
    if (v === null || typeof v !== "object") return v;
    if (Array.isArray(v.shape) && Array.isArray(v.data) && typeof v.dtype === "string" && ARRAY_OF_DTYPE[v.dtype]) {
      const array = ARRAY_OF_DTYPE[v.dtype].from(v.data, readNumber);
      array.shape = v.shape;
      array.dtype = v.dtype;
      return array;
    }
    const out = {};
    for (const [k, item] of Object.entries(v)) out[k] = decodeAnswer(item, k);
    return out;
  }

  const partBody = (part) => Object.fromEntries(Object.entries(part).map(([k, v]) => [k, isTyped(v) ? Array.from(v) : v]));

  class Client {
    /* base: the daemon's URL ("" = this page's origin). options: apiKey
     * (sent as Authorization: Bearer), timeout (ms, default 30000; 0 =
     * none), fetch (another fetch implementation), onrequest(entry) and
     * onresponse(entry) (entry: {method, path, url, body, status, ms,
     * response}: the same object, completed, for logs such as the page's). */
    constructor(base, options) {
      const o = options || {};
      this.base = String(base || "").replace(/\/+$/, "");
      this.apiKey = o.apiKey || null;
      this.timeout = o.timeout === undefined ? 30000 : o.timeout;
      this.fetch = o.fetch || ((...args) => globalThis.fetch(...args));
      this.onrequest = o.onrequest || null;
      this.onresponse = o.onresponse || null;
    }

    /* The URL of a path on this daemon. */
    url(path) {
      return this.base + path;
    }

    /* One exchange: body (any JSON value, or undefined) out, the answer's
     * JSON document back as normd wrote it (non-finite numbers still as
     * strings); a non-2xx answer, no answer or a timeout is thrown as a
     * normd.Error. The operation methods are built on it. */
    async request(method, path, body) {
      const text = body === undefined ? undefined : JSON.stringify(body, writeNumber);
      const headers = {Accept: "application/json"};
      if (text !== undefined) headers["Content-Type"] = "application/json";
      if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
      const entry = {method, path, url: this.url(path), body: text, status: null, ms: 0, response: null};
      if (this.onrequest) this.onrequest(entry);
      const now = () => (typeof performance !== "undefined" ? performance.now() : Date.now());
      const t0 = now();
      const done = (status, doc) => {
        Object.assign(entry, {status, ms: now() - t0, response: doc});
        if (this.onresponse) this.onresponse(entry);
      };
      const abort = typeof AbortController === "function" ? new AbortController() : null;
      const timer = abort && this.timeout > 0 ? setTimeout(() => abort.abort(), this.timeout) : null;
      let res, answer;
      try {
        res = await this.fetch(entry.url, {method, headers, body: text, signal: abort ? abort.signal : undefined});
        answer = await res.text();
      } catch (e) {
        done(0, null);
        if (abort && abort.signal.aborted)
          throw new NormdError(0, {code: "timeout", title: "normd did not answer in time",
            detail: `No answer from ${this.base || "this page's server"} within ${this.timeout} ms`}, path);
        throw new NormdError(0, {code: "unreachable", title: "Cannot reach normd",
          detail: `No answer from ${this.base || "this page's server"}: is normd running there, and does it allow this origin (cors_origins)? (${e.message})`}, path);
      } finally {
        if (timer !== null) clearTimeout(timer);
      }
      let doc = null;
      try { doc = JSON.parse(answer); } catch (e) { /* not JSON: a proxy's error page, say */ }
      done(res.status, doc);
      if (!res.ok) {
        const problem = doc && typeof doc === "object" ? doc : {title: res.statusText, detail: answer.slice(0, 200)};
        const retry = res.headers.get("Retry-After");
        throw new NormdError(res.status, problem, path, retry === null ? undefined : Number(retry));
      }
      return doc;
    }

    /* GET /v1/info: version, limits, dtypes, norms, routes (as JSON). */
    info() {
      return this.request("GET", "/v1/info");
    }

    /* Any normalization by its /v1 name ("layer", "group", ...). */
    norm(name, x, options) {
      return this.request("POST", `/v1/norm/${name}`, requestBody({input: x}, options)).then((a) => decodeAnswer(a, null));
    }

    /* Its gradients: grad_input, grad_weight, grad_bias. */
    normBackward(name, x, gradOutput, options) {
      return this.request("POST", `/v1/norm/${name}/backward`, requestBody({input: x, grad_output: gradOutput}, options))
        .then((a) => decodeAnswer(a, null));
    }
  }

  for (const [method, route, args] of OPERATIONS) {
    let call;
    if (args === "x") call = function (x, options) { return requestBody({input: x}, options); };
    else if (args === "grad") call = function (x, gradOutput, options) { return requestBody({input: x, grad_output: gradOutput}, options); };
    else if (args === "parts") call = function (parts) { return {parts: Array.from(parts, partBody)}; };
    else call = function (options) { return requestBody({}, options); };
    Client.prototype[method] = async function (...a) {
      return decodeAnswer(await this.request("POST", route, call(...a)), null);
    };
  }

  return {
    version: VERSION,
    client: (base, options) => new Client(base, options),
    Client,
    Error: NormdError,
    operations: OPERATIONS.map(([method, route]) => ({method, route})),
  };
});
