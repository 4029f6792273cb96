/* normd.mjs -- normd.js as an ES module with exports, for
 *   import normd, {client, NormdError} from "http://host:8080/normd.mjs";
 * normd.js is a classic script (see its opening comment for why one file
 * cannot be both). Imported for its effect, it defines globalThis.normd in
 * a browser; under Node it is CommonJS and its module.exports arrives as
 * the namespace's default. Served by the daemon at GET /normd.mjs, next to
 * GET /normd.js, which it imports from the same directory. */
import * as loaded from "./normd.js";

const normd = loaded.default || globalThis.normd;
export default normd;
export const {client, Client, operations, version} = normd;
export const NormdError = normd.Error;
