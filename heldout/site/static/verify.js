/*
 * heldout: passport and ledger-entry verification in the reader's browser.
 *
 * Written for this project, plain JavaScript, no dependencies. It reproduces the checks of
 * `heldout passport verify FILE --from EXPORT --at T` and reports the same verdict text and exit code:
 *   - strict JSON (duplicate members refused), RFC 8785 canonical bytes of the document without `signature`,
 *     and the project's emit rule for floats (rounded once to 6 decimals, half-even on the exact value) where
 *     the CLI hashes an evaluation;
 *   - Ed25519 through WebCrypto (crypto.subtle.verify({name: "Ed25519"}, ...)), SHA-256 through WebCrypto;
 *   - C2SP signed-note checkpoints (key hash = SHA-256(name || 0x0A || 0x01 || key)[:4]);
 *   - RFC 9162 inclusion and consistency proofs (RFC 6962 hashing);
 *   - lapse: the generation retired or the spec superseded, from ledger entries proven included in the head.
 * The data it checks against is embedded in the page (JSON islands), so it works from file:// with no request.
 * The keys it trusts are the site's (#heldout-keys, the key page's list), or one key the reader gives.
 */
"use strict";

(function () {
  // --- failures: a message and the exit code the CLI would give ------------------------------------------
  class Failure extends Error {
    constructor(message, exit) {
      super(message);
      this.exit = exit === undefined ? 1 : exit;
    }
  }
  const fail = (message, exit) => { throw new Failure(message, exit); };

  // --- bytes --------------------------------------------------------------------------------------------------
  const encoder = new TextEncoder();
  const utf8 = (text) => encoder.encode(text);
  const concat = (...parts) => {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  };
  const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  const equalBytes = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);
  const b64encode = (bytes) => btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));

  /* Standard base64, canonical text only (the CLI refuses texts that decode to the same bytes another way). */
  function b64decodeStrict(text, what) {
    if (typeof text !== "string") fail(`${what} is not a base64 string`);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) fail(`${what} is not valid base64`);
    let binary;
    try { binary = atob(text); } catch (e) { fail(`${what} is not valid base64`); }
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    if (b64encode(bytes) !== text) fail(`${what} is not canonical base64`);
    return bytes;
  }

  async function sha256(bytes) {
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  }

  async function ed25519Verify(publicKey, message, signature) {
    if (signature.length !== 64) return false;
    try {
      const key = await crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
      return await crypto.subtle.verify({ name: "Ed25519" }, key, signature, message);
    } catch (e) {
      return false; // a key that is not a valid point verifies nothing
    }
  }

  // --- strict JSON ------------------------------------------------------------------------------------------
  // Members whose number literal had a fraction or exponent (or exceeded 2^53): Python reads them as floats,
  // which matters where the CLI asks for an integer.
  const floatMembers = new WeakMap();
  const isFloatMember = (container, key) => (floatMembers.get(container) || new Set()).has(key);
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const MAX_SAFE = 9007199254740991;

  function parseJson(text, what) {
    let i = 0;
    const n = text.length;
    const err = (msg) => fail(`${what} is not valid JSON (${msg} at offset ${i})`);
    const ws = () => { while (i < n && " \t\n\r".includes(text[i])) i++; };
    const mark = (container, key) => {
      if (!floatMembers.has(container)) floatMembers.set(container, new Set());
      floatMembers.get(container).add(key);
    };
    function value(depth) {
      if (depth > 900) err("nesting too deep");
      ws();
      if (i >= n) err("unexpected end");
      const c = text[i];
      if (c === "{") return object(depth);
      if (c === "[") return array(depth);
      if (c === '"') return string();
      if (text.startsWith("true", i)) { i += 4; return true; }
      if (text.startsWith("false", i)) { i += 5; return false; }
      if (text.startsWith("null", i)) { i += 4; return null; }
      if (text.startsWith("NaN", i) || text.startsWith("Infinity", i) || text.startsWith("-Infinity", i)) {
        err("NaN and Infinity are not JSON");
      }
      return numberToken();
    }
    let lastWasFloat = false;
    function numberToken() {
      const m = /^-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/.exec(text.slice(i, i + 400));
      if (!m) err("expecting a value");
      i += m[0].length;
      const v = Number(m[0]);
      lastWasFloat = Boolean(m[1] || m[2]) || Math.abs(v) > MAX_SAFE;
      return v;
    }
    function string() {
      i++;
      let out = "";
      for (;;) {
        if (i >= n) err("unterminated string");
        const c = text[i];
        const code = text.charCodeAt(i);
        if (c === '"') { i++; return out; }
        if (code < 0x20) err("invalid control character in a string");
        if (c === "\\") {
          const e = text[i + 1];
          const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
          if (e in simple) { out += simple[e]; i += 2; continue; }
          if (e === "u") {
            const h = text.slice(i + 2, i + 6);
            if (!/^[0-9a-fA-F]{4}$/.test(h)) err("invalid \\u escape");
            out += String.fromCharCode(parseInt(h, 16));
            i += 6;
            continue;
          }
          err("invalid escape");
        }
        out += c;
        i++;
      }
    }
    function object(depth) {
      i++;
      const out = Object.create(null);
      const seen = new Set();
      ws();
      if (text[i] === "}") { i++; return out; }
      for (;;) {
        ws();
        if (text[i] !== '"') err("expecting a member name");
        const key = string();
        if (seen.has(key)) fail(`${what} is not acceptable JSON: duplicate member ${JSON.stringify(key)}`);
        seen.add(key);
        ws();
        if (text[i] !== ":") err("expecting ':'");
        i++;
        lastWasFloat = false;
        const v = value(depth + 1);
        if (typeof v === "number" && lastWasFloat) mark(out, key);
        out[key] = v;
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; return out; }
        err("expecting ',' or '}'");
      }
    }
    function array(depth) {
      i++;
      const out = [];
      ws();
      if (text[i] === "]") { i++; return out; }
      for (;;) {
        lastWasFloat = false;
        const v = value(depth + 1);
        if (typeof v === "number" && lastWasFloat) mark(out, out.length);
        out.push(v);
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; return out; }
        err("expecting ',' or ']'");
      }
    }
    if (typeof text !== "string" || !text.trim()) fail(`${what} is empty`);
    const result = value(0);
    ws();
    if (i !== n) err("extra data");
    return result;
  }

  function parseJsonObject(text, what) {
    const v = parseJson(text, what);
    if (!isObject(v)) fail(`${what} is JSON but not an object`);
    return v;
  }

  // --- RFC 8785 canonical bytes -----------------------------------------------------------------------------
  function hasLoneSurrogate(s) {
    for (let k = 0; k < s.length; k++) {
      const c = s.charCodeAt(k);
      if (c >= 0xd800 && c <= 0xdbff) {
        const d = s.charCodeAt(k + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { k++; continue; }
        return true;
      }
      if (c >= 0xdc00 && c <= 0xdfff) return true;
    }
    return false;
  }

  /* RFC 8785 3.2.2.3: numbers are written as ECMAScript's Number::toString writes them (shortest round-trip
   * digits, exponent from 1e21 and below 1e-6), which is what String(x) is; -0 is "0"; NaN and infinities
   * have no JSON form. Strings: JSON's escapes (3.2.2.2), which JSON.stringify applies to well-formed text. */
  function jcsText(v) {
    if (v === null) return "null";
    if (v === true) return "true";
    if (v === false) return "false";
    if (typeof v === "number") {
      if (!Number.isFinite(v)) fail("a number that is not finite has no canonical form");
      return Object.is(v, -0) ? "0" : String(v);
    }
    if (typeof v === "string") {
      if (hasLoneSurrogate(v)) fail("not canonicalisable: a string holds a lone surrogate");
      return JSON.stringify(v);
    }
    if (Array.isArray(v)) return "[" + v.map(jcsText).join(",") + "]";
    if (isObject(v)) {
      const keys = Object.keys(v).sort(); // UTF-16 code-unit order, as RFC 8785 3.2.3 requires
      return "{" + keys.map((k) => jcsText(k) + ":" + jcsText(v[k])).join(",") + "}";
    }
    fail("a value that is not JSON");
  }
  const jcsBytes = (v) => utf8(jcsText(v));

  /* Python's round(x, 6) on a double: the exact binary value rounded half-to-even at the sixth decimal, then
   * the nearest double to that decimal. Integral values are unchanged. */
  function round6(x) {
    if (Number.isInteger(x) || !Number.isFinite(x)) return x;
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, x);
    const bits = view.getBigUint64(0);
    const negative = bits >> 63n === 1n;
    const exponentBits = Number((bits >> 52n) & 0x7ffn);
    let mantissa = bits & ((1n << 52n) - 1n);
    let exponent;
    if (exponentBits === 0) { exponent = -1074; } else { mantissa |= 1n << 52n; exponent = exponentBits - 1075; }
    if (exponent >= 0) return x;
    const scaled = mantissa * 1000000n;
    const denominator = 1n << BigInt(-exponent);
    let q = scaled / denominator;
    const twice = (scaled % denominator) * 2n;
    if (twice > denominator || (twice === denominator && q % 2n === 1n)) q += 1n;
    const result = Number(`${q}e-6`);
    return negative ? -result : result;
  }

  /* seals.canonical.prepare for a parsed document: every non-integral number rounded once to 6 decimals. */
  function prepare(v) {
    if (typeof v === "number") return Number.isInteger(v) ? v : round6(v);
    if (Array.isArray(v)) return v.map(prepare);
    if (isObject(v)) {
      const out = Object.create(null);
      for (const k of Object.keys(v)) out[k] = prepare(v[k]);
      return out;
    }
    return v;
  }
  const canonicalBytes = (v) => jcsBytes(prepare(v));

  // --- times (seals.timeutil) --------------------------------------------------------------------------------
  /* parse_utc: strip, a final "Z"/"z" becomes "+00:00", then datetime.fromisoformat as CPython 3.11 reads it
   * (the date forms YYYY-MM-DD, YYYYMMDD and ISO weeks; any one character before the time; HH[:MM[:SS]] with or
   * without colons and a fraction of a second; an offset of the same form, under 24 hours); naive means UTC.
   * A port of the parser's rules, so a time the CLI accepts is accepted here and one it refuses is refused.
   * Returns microseconds since the epoch. */
  const isDigit = (c) => c !== undefined && c >= "0" && c <= "9";

  function digitsAt(s, pos, count, end) {
    if (pos + count > end) return null;
    let value = 0;
    for (let k = pos; k < pos + count; k++) {
      if (!isDigit(s[k])) return null;
      value = value * 10 + (s.charCodeAt(k) - 48);
    }
    return value;
  }

  /* CPython's parse_hh_mm_ss_ff: [hour, minute, second, microsecond, rest] or a negative code. rest is 1 when
   * characters follow the parsed part. */
  function hhmmssff(s, start, end) {
    const values = [0, 0, 0];
    let p = start;
    let hasSeparator = true;
    for (let i = 0; i < 3; i++) {
      const v = digitsAt(s, p, 2, end);
      if (v === null) return -3;
      values[i] = v;
      p += 2;
      const c = p < s.length ? s[p] : "\0";
      p++;
      if (i === 0) hasSeparator = c === ":";
      if (p >= end) return [...values, 0, c !== "\0" ? 1 : 0];
      if (hasSeparator && c === ":") continue;
      if (c === "." || c === ",") break;
      if (!hasSeparator) { p--; continue; }
      return -4;
    }
    const remains = end - p;
    const take = Math.min(remains, 6);
    const f = take === 0 ? 0 : digitsAt(s, p, take, end);
    if (f === null) return -3;
    p += take;
    const micro = take === 0 ? 0 : f * 10 ** (6 - take);
    while (p < end && isDigit(s[p])) p++;
    return [...values, micro, p < s.length ? 1 : 0];
  }

  function findDateEnd(s) {
    const n = s.length;
    if (n === 7) return 7;
    if (s[4] === "-") {
      if (s[5] === "W") {
        if (n > 8 && s[8] === "-") {
          if (n === 9) return -1;
          return n > 10 && isDigit(s[10]) ? 8 : 10;
        }
        return 8;
      }
      return 10;
    }
    if (s[4] === "W") {
      let idx = 7;
      while (idx < n && isDigit(s[idx])) idx++;
      if (idx < 9) return idx;
      return idx % 2 === 0 ? 7 : 8;
    }
    return 8;
  }

  const daysIn = (y, m) => [31, (y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0)) ? 29 : 28, 31, 30, 31, 30, 31,
    31, 30, 31, 30, 31][m - 1];

  function epochDay(y, m, d) {
    const date = new Date(0);
    date.setUTCFullYear(y, m - 1, d); // not Date.UTC, which reads years 0..99 as 1900..1999
    return Math.round(date.getTime() / 86400000);
  }

  function parseDate(s, len) {
    const year = digitsAt(s, 0, 4, s.length);
    if (year === null) return null;
    let p = 4;
    const dash = s[p] === "-";
    if (dash) p++;
    if (s[p] === "W") {
      p++;
      const week = digitsAt(s, p, 2, s.length);
      if (week === null) return null;
      p += 2;
      let day = 1;
      if (p < len) {
        if (dash && s[p++] !== "-") return null;
        day = digitsAt(s, p, 1, s.length);
        if (day === null) return null;
      }
      if (year < 1 || year > 9999) return null;
      const jan1 = epochDay(year, 1, 1);
      const weekday = ((jan1 % 7) + 7 + 3) % 7; // Monday 0 (1970-01-01 was a Thursday)
      if (week < 1 || week > 53 || day < 1 || day > 7) return null;
      if (week === 53) {
        const leap = daysIn(year, 2) === 29;
        if (!(weekday === 3 || (weekday === 2 && leap))) return null;
      }
      const monday1 = jan1 - weekday + (weekday > 3 ? 7 : 0);
      const date = new Date((monday1 + (week - 1) * 7 + (day - 1)) * 86400000);
      return [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
    }
    const month = digitsAt(s, p, 2, s.length);
    if (month === null) return null;
    p += 2;
    if (dash && s[p++] !== "-") return null;
    const day = digitsAt(s, p, 2, s.length);
    if (day === null) return null;
    return [year, month, day];
  }

  function parseUtc(text, what) {
    if (typeof text !== "string") fail(`${what} is not a string`);
    let raw = text.trim();
    if (raw.endsWith("Z") || raw.endsWith("z")) raw = raw.slice(0, -1) + "+00:00";
    const bad = () => fail(`${what} ${JSON.stringify(text)} is not an ISO 8601 time such as 2026-08-04T00:00:00Z`);
    if (raw.length < 7) bad();
    const dateEnd = findDateEnd(raw);
    if (dateEnd < 0) bad();
    const ymd = parseDate(raw, dateEnd);
    if (!ymd) bad();
    const [year, month, day] = ymd;
    let hour = 0, minute = 0, second = 0, micro = 0, offset = 0;
    if (raw.length > dateEnd) {
      const t = raw.slice(dateEnd + 1);
      let tz = 0;
      while (tz < t.length && !"Z+-".includes(t[tz])) tz++;
      if (t.length === 0) bad();
      const parsed = hhmmssff(t, 0, tz);
      if (!Array.isArray(parsed)) bad();
      [hour, minute, second, micro] = parsed;
      if (tz === t.length) {
        if (parsed[4] === 1) bad();
      } else if (t[tz] === "Z") {
        if (tz + 1 !== t.length) bad();
      } else {
        const sign = t[tz] === "-" ? -1 : 1;
        const zone = hhmmssff(t, tz + 1, t.length);
        if (!Array.isArray(zone) || zone[4] !== 0) bad();
        offset = sign * ((zone[0] * 3600 + zone[1] * 60 + zone[2]) * 1e6 + zone[3]);
        if (Math.abs(offset) >= 86400e6) bad();
      }
    }
    if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 ||
        second > 59) bad();
    const date = new Date(0);
    date.setUTCFullYear(year, month - 1, day);
    date.setUTCHours(hour, minute, second, 0);
    return date.getTime() * 1000 + micro - offset;
  }

  function formatUtc(micros) {
    const ms = Math.floor(micros / 1e6) * 1000;
    return new Date(ms).toISOString().slice(0, 19) + "Z";
  }

  // --- RFC 6962 / 9162 --------------------------------------------------------------------------------------
  const leafHash = (entry) => sha256(concat(new Uint8Array([0]), entry));
  const nodeHash = (left, right) => sha256(concat(new Uint8Array([1]), left, right));

  function checkPath(proof) {
    proof.forEach((h, k) => { if (h.length !== 32) fail(`proof element ${k} is not a 32-byte hash`); });
  }

  async function rootFromInclusion(index, size, leaf, proof) {
    checkPath(proof);
    if (index >= size) fail(`index ${index} is outside a tree of size ${size}`);
    let fn = BigInt(index), sn = BigInt(size - 1), r = leaf;
    for (const sibling of proof) {
      if (sn === 0n) fail("inclusion proof is longer than the tree is deep");
      if ((fn & 1n) === 1n || fn === sn) {
        r = await nodeHash(sibling, r);
        while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
      } else {
        r = await nodeHash(r, sibling);
      }
      fn >>= 1n; sn >>= 1n;
    }
    if (sn !== 0n) fail("inclusion proof is shorter than the tree is deep");
    return r;
  }

  async function verifyInclusion(index, size, leaf, proof, root) {
    const computed = await rootFromInclusion(index, size, leaf, proof);
    if (!equalBytes(computed, root)) fail(`inclusion proof for index ${index} does not lead to the root of size ${size}`);
  }

  async function verifyConsistency(oldSize, newSize, oldRoot, newRoot, proof) {
    checkPath(proof);
    if (oldSize > newSize) fail(`old size ${oldSize} is larger than new size ${newSize}`);
    if (oldSize === newSize) {
      if (proof.length) fail("a consistency proof between equal sizes must be empty");
      if (!equalBytes(oldRoot, newRoot)) fail("two different roots for the same size");
      return;
    }
    if (oldSize === 0) fail("a consistency proof from the empty tree proves nothing and is refused");
    if (!proof.length) fail("consistency proof is empty");
    let path = proof;
    if ((oldSize & (oldSize - 1)) === 0) path = [oldRoot, ...proof];
    let fn = BigInt(oldSize - 1), sn = BigInt(newSize - 1);
    while ((fn & 1n) === 1n) { fn >>= 1n; sn >>= 1n; }
    let fr = path[0], sr = path[0];
    for (const item of path.slice(1)) {
      if (sn === 0n) fail("consistency proof is too long");
      if ((fn & 1n) === 1n || fn === sn) {
        fr = await nodeHash(item, fr);
        sr = await nodeHash(item, sr);
        while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
      } else {
        sr = await nodeHash(sr, item);
      }
      fn >>= 1n; sn >>= 1n;
    }
    if (sn !== 0n) fail("consistency proof is too short");
    if (!equalBytes(fr, oldRoot)) fail(`consistency proof does not lead to the root of size ${oldSize}`);
    if (!equalBytes(sr, newRoot)) fail(`consistency proof does not lead to the root of size ${newSize}`);
  }

  // --- C2SP signed-note checkpoints ---------------------------------------------------------------------------
  // A signed-note key name: no whitespace as Go's note package reads it (unicode.IsSpace; keys.names.NOTE_NAME),
  // not JavaScript's \s (which takes U+FEFF and not U+0085), and no '+'.
  const NOTE_NAME = /^[^\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000+]+$/u;
  const EM_DASH = "\u2014";

  function parseCheckpoint(note) {
    if (typeof note !== "string") fail("checkpoint note is not text");
    if (utf8(note).length > 16 * 1024) fail("checkpoint note is too large");
    if (/[\x00-\x09\x0b-\x1f\x7f]/.test(note)) fail("checkpoint note contains control characters other than newline");
    if (!note.endsWith("\n")) fail("a signed note ends with a newline");
    const split = note.lastIndexOf("\n\n");
    if (split < 0) fail("a signed note has a blank line between its text and its signatures");
    const body = note.slice(0, split + 1);
    const block = note.slice(split + 2);
    const signatures = block.slice(0, -1).split("\n").map((line) => {
      const prefix = EM_DASH + " ";
      if (!line.startsWith(prefix)) fail("a signature line starts with an em dash and a space");
      const parts = line.slice(prefix.length).split(" ");
      if (parts.length !== 2 || !NOTE_NAME.test(parts[0])) fail("a signature line is '\u2014 <name> <base64>'");
      const blob = b64decodeStrict(parts[1], "note signature");
      if (blob.length < 5) fail("a note signature holds a 4-byte key hash and a signature");
      return { name: parts[0], keyHash: blob.slice(0, 4), signature: blob.slice(4) };
    });
    const lines = body.slice(0, -1).split("\n");
    if (lines.length < 3) fail("a checkpoint has an origin, a size and a root line");
    const [origin, sizeText, rootText, ...extensions] = lines;
    if (!origin) fail("the checkpoint origin line is empty");
    if (!/^(0|[1-9][0-9]{0,18})$/.test(sizeText)) fail("the checkpoint size line is not a decimal number");
    if (BigInt(sizeText) >= 1n << 63n) fail("the checkpoint size is out of range");
    const root = b64decodeStrict(rootText, "checkpoint root");
    if (root.length !== 32) fail("the checkpoint root is not a 32-byte hash");
    if (extensions.some((line) => !line)) fail("a checkpoint extension line is empty");
    return { origin, size: Number(sizeText), root, body, signatures };
  }

  async function noteKeyHash(name, publicKey) {
    return (await sha256(concat(utf8(name), new Uint8Array([0x0a, 0x01]), publicKey))).slice(0, 4);
  }

  async function verifyCheckpoint(note, ledgerKey, origin) {
    const checkpoint = parseCheckpoint(note);
    if (origin !== null && checkpoint.origin !== origin) fail("checkpoint is for another log (origin differs)");
    const keyHash = await noteKeyHash(ledgerKey.name, ledgerKey.raw);
    const mine = checkpoint.signatures.filter((s) => s.name === ledgerKey.name && equalBytes(s.keyHash, keyHash));
    if (!mine.length) fail("checkpoint is not signed by the ledger key");
    for (const s of mine) {
      if (!(await ed25519Verify(ledgerKey.raw, utf8(checkpoint.body), s.signature))) {
        fail("checkpoint signature does not verify under the ledger key");
      }
    }
    return checkpoint;
  }

  // --- the ledger as the page carries it ----------------------------------------------------------------------
  /* Entry 0 names the ledger (its SHA-256 gives the id) and declares the checkpoint key. */
  async function openLedger(context) {
    const entries = context.entries || {};
    const genesisText = entries["0"];
    if (typeof genesisText !== "string") fail("this page carries no entry 0 of the ledger");
    const id = hex(await sha256(utf8(genesisText))).slice(0, 20);
    if (id !== context.ledger_id) fail("entry 0 on this page does not hash to the ledger id");
    const genesis = parseJsonObject(genesisText, "entry 0");
    const key = genesis.key || {};
    const raw = b64decodeStrict(key.public_key_b64, "ledger key");
    if (raw.length !== 32) fail("the ledger key is not 32 bytes");
    const ledgerKey = { key_id: key.key_id, name: key.name, raw };
    const head = await verifyCheckpoint(context.head_note, ledgerKey, context.origin);
    return { id, origin: context.origin, key: ledgerKey, head, entries };
  }

  /* Entries the page proves included in the head (the passport's own, its seal, retire or reveal, spec, key): what
   * lapse is decided from. */
  async function provenEntries(ledger, context) {
    const out = [];
    const inclusion = context.inclusion || {};
    for (const index of Object.keys(inclusion).map(Number).sort((a, b) => a - b)) {
      const text = ledger.entries[String(index)];
      const proof = inclusion[String(index)].map((h) => b64decodeStrict(h, "inclusion proof"));
      await verifyInclusion(index, ledger.head.size, await leafHash(utf8(text)), proof, ledger.head.root);
      out.push([index, parseJsonObject(text, `entry ${index}`)]);
    }
    return out;
  }

  // --- passports (seals.signing, seals.passport, heldout.passports) -----------------------------------------------
  const TOP_LEVEL = ["canonicalisation", "computed", "declared", "expiry_basis", "expiry_utc", "issued_utc",
    "issuer", "observed", "passport_version", "signature", "spec_version", "subject"];
  const COMPUTED = ["audit", "cross_site", "evaluations", "heldout", "sources"];
  // The fixed texts of FORMATS.md section 12 (heldout.passports.DECLARED_NOTE, OBSERVED_NOTE, expiry_of).
  const DECLARED_NOTE = "No vendor declaration: this passport is issued by the evaluation operator from logged " +
    "evidence; a vendor's intended-use claims would be a separate, vendor-signed block.";
  const OBSERVED_NOTE = "Not available: production history and drift require continuous monitoring, which this " +
    "operator does not run. The object is present and null on purpose.";
  const CLOCK_TOLERANCE_MICROS = 86400e6;  // FORMATS.md section 1: one day
  const PUBLIC_ANCHOR = "the public generation (its cases and labels are published: this evidence is not held out)";
  const SEALED_ANCHOR = "the sealed held-out generation";
  const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
  const truthy = (v) => !(v === null || v === undefined || v === false || v === 0 || v === "" ||
    (Array.isArray(v) && v.length === 0) || (isObject(v) && Object.keys(v).length === 0));
  const get = (o, k) => (isObject(o) && has(o, k) ? o[k] : undefined);
  /* Python's == on parsed JSON values (a missing member is None, like dict.get). */
  const sameJson = (a, b) => jcsOrNull(a === undefined ? null : a) === jcsOrNull(b === undefined ? null : b);
  const jcsOrNull = (v) => { try { return jcsText(v); } catch (e) { return Symbol("unwritable"); } };

  function parseIssuer(body) {
    if (!isObject(body)) fail("document has no issuer object");
    for (const m of ["algo", "key_id", "name", "public_key_b64"]) {
      if (typeof body[m] !== "string") fail(`issuer.${m} is missing or not a string`);
    }
    if (body.algo !== "Ed25519") fail("issuer.algo is not Ed25519");
    const raw = b64decodeStrict(body.public_key_b64, "public key");
    if (raw.length !== 32) fail("an Ed25519 public key is 32 bytes");
    return { algo: body.algo, key_id: body.key_id, name: body.name, raw };
  }

  async function verifyDocument(doc, trusted, what) {
    if (!isObject(doc)) fail(`${what} is not a JSON object`);
    if (!has(doc, "signature")) fail(`${what} has no signature member`);
    const signature = b64decodeStrict(doc.signature, `${what} signature`);
    if (signature.length !== 64) fail(`${what} signature is ${signature.length} bytes; Ed25519 signatures are 64`);
    const issuer = parseIssuer(get(doc, "issuer"));
    if (!equalBytes(issuer.raw, trusted.raw)) fail(`${what} is issued under a key that is not the trusted one`);
    if (trusted.key_id !== null && issuer.key_id !== trusted.key_id) {
      fail(`${what} names key id ${JSON.stringify(issuer.key_id)}; the trusted key is ${JSON.stringify(trusted.key_id)}`);
    }
    const body = Object.create(null);
    for (const k of Object.keys(doc)) if (k !== "signature") body[k] = doc[k];
    if (!(await ed25519Verify(trusted.raw, jcsBytes(body), signature))) {
      fail(`${what} signature does not verify: the signed content was changed or signed by another key`);
    }
    return issuer;
  }

  function requireMember(body, member, test, kind, where) {
    if (!has(body, member)) fail(`passport lacks ${where}${member}`);
    if (!test(body[member])) fail(`passport ${where}${member} is not ${kind}`);
    return body[member];
  }

  function parsePassport(doc) {
    if (!isObject(doc)) fail("passport is not a JSON object");
    for (const m of TOP_LEVEL) if (!has(doc, m)) fail(`passport lacks ${m}`);
    const subject = requireMember(doc, "subject", isObject, "dict", "");
    const computed = requireMember(doc, "computed", isObject, "dict", "");
    for (const m of COMPUTED) if (!has(computed, m)) fail(`passport lacks computed.${m}`);
    const evaluations = requireMember(computed, "evaluations", Array.isArray, "list", "computed.");
    evaluations.forEach((e, k) => { if (!isObject(e)) fail(`computed.evaluations[${k}] is not an object`); });
    requireMember(computed, "sources", Array.isArray, "list", "computed.");
    const heldout = requireMember(computed, "heldout", (v) => v === null || isObject(v), "dict or NoneType", "computed.");
    const isString = (v) => typeof v === "string";
    requireMember(doc, "passport_version", isString, "str", "");
    const specVersion = requireMember(doc, "spec_version", isString, "str", "");
    const modelId = requireMember(subject, "model_id", isString, "str", "subject.");
    const issuer = parseIssuer(doc.issuer);
    const issued = parseUtc(requireMember(doc, "issued_utc", isString, "str", ""), "issued_utc");
    const expiry = parseUtc(requireMember(doc, "expiry_utc", isString, "str", ""), "expiry_utc");
    requireMember(doc, "expiry_basis", isString, "str", "");
    return { doc, specVersion, modelId, issuer, issued, expiry, evaluations, heldout };
  }

  // A passport says what its cited bundles say (FORMATS.md section 12; heldout.passports.check_subject_and_spec):
  // its spec_version is every cited entry's and evaluation's, and its subject describes the model as they do.
  function checkSubjectAndSpec(passport, cited) {
    for (const [index, entry, evaluation] of cited) {
      for (const [what, holder] of [["entry", entry], ["evaluation", evaluation]]) {
        if (isObject(holder) && has(holder, "spec_version") && !sameJson(holder.spec_version, passport.specVersion)) {
          fail(`the passport is issued under ${passport.specVersion}, and its cited bundle ${index} was evaluated ` +
            `under ${JSON.stringify(holder.spec_version)} (its ${what}): a passport rests on evaluations of its own spec`);
        }
      }
    }
    const tasks = cited.map(([, entry]) => String(get(entry, "task")));
    const ordered = [...new Set(tasks)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));  // (ASCII task names)
    if (ordered.length !== tasks.length || ordered.some((task, k) => task !== tasks[k])) {
      fail("the passport's cited bundles are not one per task in task order");
    }
    const said = {};  // as the first cited entry states them (a model's entries may differ by task: params)
    for (const member of ["model_name", "family", "params", "behaviour_version"]) {
      if (member !== "params" && new Set(cited.map(([, entry]) => jcsOrNull(get(entry, member) ?? null))).size > 1) {
        fail(`the passport's cited bundles: they name the model differently (${member})`);
      }
      said[member] = cited.length ? (get(cited[0][1], member) ?? null) : null;
    }
    const named = cited.filter(([, entry]) => has(entry, "code_fingerprint")).map(([, entry]) => entry.code_fingerprint);
    if (named.some((value) => typeof value !== "string")) fail("a cited bundle's code_fingerprint is not text");
    const byCodePoint = (a, b) => {  // Python's order of str: by code point, not by UTF-16 unit
      const x = Array.from(a, (c) => c.codePointAt(0));
      const y = Array.from(b, (c) => c.codePointAt(0));
      for (let k = 0; k < Math.min(x.length, y.length); k++) if (x[k] !== y[k]) return x[k] - y[k];
      return x.length - y.length;
    };
    const prints = [...new Set(named)].sort(byCodePoint);
    said.code_fingerprints = prints;
    said.code_fingerprint = prints.length ? prints[prints.length - 1] : null;
    // No vendor declaration, production history or cross-site result rides on the signature alone (FORMATS.md
    // rule 11; the build checks the notes and the expiry basis against the log too).
    for (const [member, value] of [["declared", get(passport.doc, "declared")], ["observed", get(passport.doc, "observed")],
      ["computed.cross_site", get(get(passport.doc, "computed"), "cross_site")]]) {
      if (value !== null && value !== undefined) fail(`the passport of this log: its ${member} is not what its issue writes`);
    }
    const subject = get(passport.doc, "subject");
    for (const [member, value] of Object.entries(said)) {
      if (!sameJson(get(subject, member), value)) fail(`the passport's subject.${member} is not what its cited bundles say`);
    }
  }

  function issuedAfter(passport, index, entry) {
    const logged = parseUtc(String(get(entry, "created_utc")), `entry ${index} created_utc`);
    if (passport.issued < logged) {
      fail(`the passport states it was issued ${formatUtc(passport.issued)}, before entry ${index} it rests on ` +
        `was logged (${formatUtc(logged)})`);
    }
  }

  function verdictLine(passport, state, reason) {
    const head = `signature valid, issued by ${passport.issuer.name} under key ${passport.issuer.key_id}`;
    if (state === "expired") return `${head}, expired ${formatUtc(passport.expiry)}`;
    if (state === "lapsed") return `${head}, lapsed: ${reason}`;
    return `${head}, valid until ${formatUtc(passport.expiry)}`;
  }
  const EXIT = { valid: 0, expired: 3, lapsed: 4 };

  async function onLedger(passport, ledger, context, at) {
    // The passport counts only if the log carries it: a passport entry, proven included in the head, whose
    // passport_sha256 is this document's (heldout.passports.check_passport_on_ledger, step 2).
    const digest = hex(await sha256(canonicalBytes(passport.doc)));
    const proven = await provenEntries(ledger, context);
    const logged = proven.find(([, e]) => get(e, "type") === "passport" && get(e, "passport_sha256") === digest);
    if (!logged) {
      fail(`the passport was never logged: no passport entry of ledger ${ledger.id} carries its SHA-256`);
    }
    const heldout = passport.heldout;
    if (!isObject(heldout)) fail("the passport has no computed.heldout to check against a ledger");
    const [passportIndex, passportEntry] = logged;
    for (const [member, expected, found] of [["subject.model_id", get(passportEntry, "model_id"), passport.modelId],
      ["computed.heldout.generation", get(passportEntry, "generation"), get(heldout, "generation")]]) {
      if (!sameJson(expected, found)) fail(`the passport disagrees with its ledger on ${member}`);
    }
    if (heldout.ledger_id !== ledger.id) fail("the passport is anchored to another ledger");
    const checkpointMember = truthy(get(heldout, "checkpoint")) ? heldout.checkpoint : {};
    if (!isObject(checkpointMember)) fail("the passport's checkpoint is not an object");
    const note = get(checkpointMember, "note");
    if (typeof note !== "string") fail("the passport carries no checkpoint note");
    const checkpoint = await verifyCheckpoint(note, ledger.key, ledger.origin);
    const head = ledger.head;
    if (checkpoint.size > head.size) fail("the passport's checkpoint is ahead of the ledger (rolled back?)");
    let consistency = [];
    if (checkpoint.size !== head.size) {
      if (context.consistency_from !== checkpoint.size) {
        fail(`this page carries no consistency proof from size ${checkpoint.size} to the head`);
      }
      consistency = context.consistency.map((h) => b64decodeStrict(h, "consistency proof"));
    }
    await verifyConsistency(checkpoint.size, head.size, checkpoint.root, head.root, consistency);
    // A withheld bundle (heldout.generations.release.cited_evaluation_matches) is cited by its public record
    // alone, only on a generation whose sealed release mode withholds, in that mode.
    const sealOf = proven.find(([, e]) => get(e, "type") === "seal" && sameJson(get(e, "generation"),
      get(heldout, "generation")));
    const sealRelease = sealOf ? get(sealOf[1], "release") : null;
    const sealMode = isObject(sealRelease) && has(sealRelease, "mode") ? get(sealRelease, "mode") : "full";
    let bundles = get(heldout, "bundles");
    const citedEntries = [];
    bundles = truthy(bundles) ? bundles : [];
    if (!Array.isArray(bundles)) fail("computed.heldout.bundles is not a list");
    for (let position = 0; position < bundles.length; position++) {
      const ref = bundles[position];
      const index = get(ref, "index");
      if (!isObject(ref) || !(typeof index === "boolean" || (Number.isInteger(index) && !isFloatMember(ref, "index")))) {
        fail(`a cited bundle has no index (computed.heldout.bundles[${position}])`);
      }
      const number = index === true ? 1 : index === false ? 0 : index;
      if (!(number >= 0 && number < checkpoint.size)) fail("a cited bundle lies outside the passport's checkpoint");
      if (typeof index === "boolean") fail(`index ${index ? "True" : "False"} is outside the export`, 2);
      const text = ledger.entries[String(index)];
      if (typeof text !== "string") fail(`entry ${index} is not among the entries this page carries for this passport`);
      let proofMember = get(ref, "inclusion_proof");
      proofMember = truthy(proofMember) ? proofMember : [];
      if (typeof proofMember === "string") proofMember = Array.from(proofMember);
      else if (isObject(proofMember)) proofMember = Object.keys(proofMember);
      if (!Array.isArray(proofMember)) fail("inclusion proof is not a list");
      const proof = proofMember.map((h) => b64decodeStrict(h, "inclusion proof"));
      const data = utf8(text);
      await verifyInclusion(index, checkpoint.size, await leafHash(data), proof, checkpoint.root);
      const entry = parseJsonObject(text, `entry ${index}`);
      // The cited entry must be this model's bundle on this generation (FORMATS.md rule 11).
      const expected = [["type", "bundle"], ["model_id", passport.modelId], ["generation", get(heldout, "generation")],
        ["task", get(ref, "task")], ["evaluation_sha256", get(ref, "evaluation_sha256")],
        ["predictions_sha256", get(ref, "predictions_sha256")]];
      for (const [member, value] of expected) {
        if (!sameJson(get(entry, member), value)) fail(`cited entry ${index} is not the passport's bundle (${member} differs)`);
      }
      if (get(ref, "leaf_hash_b64") !== b64encode(await leafHash(data))) {
        fail(`cited bundle ${index}: leaf_hash_b64 is not the entry's leaf hash`);
      }
      if (position >= passport.evaluations.length) fail(`the passport has no evaluation ${position}`);
      citedEntries.push([index, entry, passport.evaluations[position]]);
      const digest = hex(await sha256(canonicalBytes(passport.evaluations[position])));
      const release = get(entry, "release");
      const withheld = (sealMode === "ladder" || sealMode === "thresholdout") && isObject(release) &&
        get(release, "mode") === sealMode && sameJson(passport.evaluations[position], {
          kind: "withheld-bundle", task: get(entry, "task"), release, evaluation_sha256: get(entry, "evaluation_sha256"),
          note: "evaluation withheld until the generation is retired; only the released value is public" });
      if (!withheld && digest !== get(entry, "evaluation_sha256")) {
        fail(`evaluation ${position} of the passport is not the one bundle ${index} logged`);
      }
    }
    if (passport.evaluations.length !== bundles.length) {
      fail("the passport carries evaluations that no cited bundle logged");
    }
    checkSubjectAndSpec(passport, citedEntries);
    // Issued no earlier than the evidence it rests on (heldout.passports._check_issued_after_evidence): its
    // cited bundles (the seal below), and the witness cosignatures on its checkpoint, less the clock tolerance.
    for (const [index, entry] of citedEntries) issuedAfter(passport, index, entry);
    const witnessed = checkpoint.signatures.filter((s) => s.signature.length === 72)
      .map((s) => Number(new DataView(s.signature.buffer, s.signature.byteOffset, 8).getBigUint64(0)) * 1e6);
    if (witnessed.length && passport.issued < Math.max(...witnessed) - CLOCK_TOLERANCE_MICROS) {
      fail(`the passport states it was issued ${formatUtc(passport.issued)}, more than the clock tolerance (a day) ` +
        `before a witness cosigned the checkpoint it carries (${formatUtc(Math.max(...witnessed))})`);
    }
    // Generations and supersessions from the entries the page proves included in the head (the page carries
    // the ones that count for this passport; as in heldout.generations.state, the first of each counts, and a
    // reveal of a sealed generation not yet retired retires it).
    const generations = new Map();
    const supersessions = new Map();
    for (const [index, entry] of proven) {
      const kind = get(entry, "type");
      const generation = generations.get(String(get(entry, "generation")));
      if (kind === "seal" && !generations.has(String(entry.generation))) {
        generations.set(String(entry.generation), { set_hash: String(entry.set_hash), retire: null, sealIndex: index,
          sealEntry: entry,
          membership: String(get(entry, "membership") ?? "sealed"),
          expiry: parseUtc(String(entry.expiry_utc), `entry ${index} expiry_utc`) });
      } else if (kind === "retire" && generation && !generation.retire) {
        generation.retire = { index, reason: String(get(entry, "reason") ?? "None"),
          at: parseUtc(entry.created_utc, `entry ${index} created_utc`) };
      } else if (kind === "reveal" && generation && !generation.retire && generation.membership !== "public") {
        generation.retire = { index, reason: "revealed before it was retired",
          at: parseUtc(entry.created_utc, `entry ${index} created_utc`) };
      } else if (kind === "spec" && !supersessions.has(String(entry.spec_version))) {
        // As heldout.specs.load_supersessions: one closing a cycle is ignored, one dated before its own entry
        // counts from the entry's time (a supersession never lapses anything retroactively).
        const version = String(entry.spec_version);
        let successor = String(entry.superseded_by);
        const seen = new Set([version]);
        while (!seen.has(successor) && supersessions.has(successor)) {
          seen.add(successor);
          successor = supersessions.get(successor).by;
        }
        if (seen.has(successor)) continue;
        const effective = parseUtc(String(entry.effective_utc), `entry ${index} effective_utc`);
        const created = parseUtc(String(entry.created_utc), `entry ${index} created_utc`);
        supersessions.set(version, { by: String(entry.superseded_by), index,
          effective: effective < created ? created : effective });
      }
    }
    const name = get(heldout, "generation");
    const state = generations.get(name === null || name === undefined ? "None" : String(name));
    if (!state) fail(`the ledger has no generation ${JSON.stringify(name)}`);
    if (state.sealIndex > passportIndex) fail(`the ledger has no generation ${JSON.stringify(name)} sealed before the passport`);
    issuedAfter(passport, state.sealIndex, state.sealEntry);
    if (state.retire && state.retire.index < passportIndex) {
      fail(`the passport of entry ${passportIndex} was logged after ${String(name)} was retired (entry ` +
        `${state.retire.index}): a passport is issued only against a current generation`);
    }
    const passportLogged = parseUtc(String(get(passportEntry, "created_utc")), `entry ${passportIndex} created_utc`);
    if (passportLogged >= state.expiry) {
      fail(`the passport of entry ${passportIndex} was logged ${formatUtc(passportLogged)}, when ${String(name)} had ` +
        `expired (${formatUtc(state.expiry)}): a passport is issued only against a current generation`);
    }
    if (state.set_hash !== get(heldout, "set_hash")) fail("the passport's set hash is not its generation's");
    if (get(heldout, "expiry_utc") !== formatUtc(state.expiry)) fail("the passport's expiry_utc is not its generation's");
    if (passport.expiry > state.expiry) {
      fail(`the passport's expiry ${formatUtc(passport.expiry)} is after its generation's (${String(name)}, ${formatUtc(state.expiry)})`);
    }
    const superseded = supersessions.get(passport.specVersion);
    if (superseded && superseded.index < passportIndex && passport.issued >= superseded.effective) {
      fail(`the passport of entry ${passportIndex} was issued under spec ${passport.specVersion} superseded by ` +
        `${superseded.by} from ${formatUtc(superseded.effective)} (entry ${superseded.index})`);
    }
    // Its times are the log's (heldout.passports._check_passport_times; the lower bound on issued_utc needs an
    // entry this page does not carry, and is the build's check).
    let expectedExpiry = state.expiry;
    if (superseded && superseded.index < passportIndex && superseded.effective < expectedExpiry) {
      expectedExpiry = superseded.effective;
    }
    if (passport.expiry !== expectedExpiry) {
      fail(`the passport of entry ${passportIndex} expires ${formatUtc(passport.expiry)}, but its ledger gives ` +
        formatUtc(expectedExpiry));
    }
    if (passport.issued > parseUtc(String(get(passportEntry, "created_utc")), `entry ${passportIndex} created_utc`)) {
      fail(`the passport of entry ${passportIndex} states it was issued after its own entry was logged`);
    }
    // The texts beside its numbers are what the issue writes (heldout.passports._check_issuer_statements and
    // expiry_of; FORMATS.md section 12): fixed notes, and the expiry basis its ledger gives.
    const generationName = String(name);
    const basis = expectedExpiry !== state.expiry
      ? `spec ${passport.specVersion} superseded by ${superseded.by} from ${formatUtc(superseded.effective)} ` +
        `(ledger entry ${superseded.index}), before the expiry of the generation this evidence is anchored to ` +
        `(${generationName}, ${formatUtc(state.expiry)}); the passport lapses earlier if the generation is retired`
      : `${state.membership === "public" ? PUBLIC_ANCHOR : SEALED_ANCHOR} this evidence is anchored to ` +
        `(${generationName}, set hash ${state.set_hash.slice(0, 16)}...) is published to expire ` +
        `${formatUtc(state.expiry)}; the passport lapses earlier if the generation is retired or its spec version superseded`;
    for (const [member, expected] of [["declared_note", DECLARED_NOTE], ["observed_note", OBSERVED_NOTE],
      ["expiry_basis", basis]]) {
      if (get(passport.doc, member) !== expected) {
        fail(`the passport of entry ${passportIndex}: its ${member} is not what its issue writes ` +
          "(a statement its ledger does not bear out)");
      }
    }
    if (state.retire) {
      return { state: "lapsed", reason: `generation ${generationName} retired (${state.retire.reason}) ${formatUtc(state.retire.at)}` };
    }
    if (superseded && at >= superseded.effective) {
      return { state: "lapsed",
        reason: `spec ${passport.specVersion} superseded by ${superseded.by} from ${formatUtc(superseded.effective)}` };
    }
    // A bundle of the model on the generation outside the passport's checkpoint, dated by the reference time: the
    // passport no longer stands for the model's latest evaluations (the page carries the first one).
    for (const [index, entry] of proven) {
      if (get(entry, "type") === "bundle" && index >= checkpoint.size && get(entry, "model_id") === passport.modelId &&
          String(get(entry, "generation")) === generationName &&
          parseUtc(String(entry.created_utc), `entry ${index} created_utc`) <= at) {
        return { state: "lapsed", reason: `${passport.modelId} was evaluated on ${generationName} again after this ` +
          `passport's evidence (bundle entry ${index}, ${entry.created_utc}): a passport stands for the model's ` +
          "latest evaluations" };
      }
    }
    return null;
  }

  function siteKeys() {
    const element = document.getElementById("heldout-keys");
    return element ? JSON.parse(element.textContent) : [];
  }

  /* The CLI's `heldout passport verify`: returns {exit, text}. options: key (base64, like --key; otherwise the
   * site's keys by issuer key id, like the keyring), ledger (the page's ledger data, like --from; null for a
   * passport checked on its own), at (ISO 8601 reference time, like --at). */
  async function verifyPassport(text, options) {
    try {
      const doc = parseJsonObject(text, "passport");
      let trusted;
      if (options.key) {
        let raw;
        try { raw = b64decodeStrict(options.key.trim(), "--key"); } catch (e) { fail("--key is not a base64 key", 2); }
        if (raw.length !== 32) fail("an Ed25519 public key is 32 bytes", 2);
        trusted = { key_id: null, raw };
      } else {
        const issuer = get(doc, "issuer");
        if (!isObject(issuer) || typeof issuer.key_id !== "string") fail("document has no issuer.key_id to look up in the keyring");
        const found = siteKeys().find((k) => k.key_id === issuer.key_id);
        if (!found) {
          fail(`issuer key ${JSON.stringify(issuer.key_id)} is not among the keys this page trusts (the ledger key and ` +
            "this passport's issuer, as the site's key page lists them)");
        }
        trusted = { key_id: found.key_id, raw: b64decodeStrict(found.public_key_b64, "site key") };
      }
      const at = parseUtc(options.at, "--at");
      let ledger = null;
      if (options.ledger) {
        const computed = get(doc, "computed");
        const heldout = isObject(computed) ? get(computed, "heldout") : undefined;
        const ledgerId = isObject(heldout) ? get(heldout, "ledger_id") : undefined;
        if (typeof ledgerId !== "string") fail("the passport is not anchored to a ledger (computed.heldout is empty)");
        ledger = await openLedger(options.ledger);
        if (ledgerId !== ledger.id) fail("the export is of another ledger than the one the passport names");
      }
      await verifyDocument(doc, trusted, "passport");
      const passport = parsePassport(doc);
      if (at < passport.issued) {  // (seals.passport.verify_passport: valid from its issue on)
        fail(`the passport was issued ${formatUtc(passport.issued)}: at ${formatUtc(at)} it did not exist yet, so it ` +
          "is not valid then (a passport dated ahead of the reference time is not yet valid)");
      }
      let state = at >= passport.expiry ? "expired" : "valid";
      let reason = null;
      if (ledger) {
        const lapse = await onLedger(passport, ledger, options.ledger, at);
        if (lapse) { state = lapse.state; reason = lapse.reason; }
      }
      let line = verdictLine(passport, state, reason);
      if (!ledger) line += "; not checked against its ledger (give --store or --from)";
      return { exit: EXIT[state], text: line, state };
    } catch (e) {
      if (e instanceof Failure) return { exit: e.exit, text: `error: ${e.message}`, state: "failed" };
      return { exit: 1, text: `error: ${e && e.message ? e.message : String(e)}`, state: "failed" };
    }
  }

  /* "verify this entry": the head checkpoint under the ledger key, then the entry's inclusion proof. The entry's
   * bytes: item.entry where given (a caller's own data), else the text of the page's <pre id="raw<index>">. */
  async function verifyEntry(index, context) {
    try {
      const ledger = await openLedger(context.ledger);
      const item = context.page[String(index)];
      if (!item) fail(`entry ${index} is not on this page`);
      // The entry's bytes are on the page once, as the text of its <pre id="raw<index>">.
      const shown = typeof document !== "undefined" ? document.getElementById(`raw${index}`) : null;
      const text = typeof item.entry === "string" ? item.entry : shown ? shown.textContent : null;
      if (typeof text !== "string") fail(`entry ${index} is not on this page`);
      const proof = item.proof.map((h) => b64decodeStrict(h, "inclusion proof"));
      await verifyInclusion(index, ledger.head.size, await leafHash(utf8(text)), proof, ledger.head.root);
      return { exit: 0, text: `entry ${index} is included in ledger ${ledger.id} at size ${ledger.head.size} (root ${b64encode(ledger.head.root)}), signed by ${ledger.key.name}` };
    } catch (e) {
      return { exit: e instanceof Failure ? e.exit : 1, text: `error: ${e && e.message ? e.message : String(e)}` };
    }
  }

  // --- the page ------------------------------------------------------------------------------------------------
  const json = (id) => {
    const element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  };
  const show = (output, result) => {
    output.textContent = `exit ${result.exit}: ${result.text}`;
    output.className = result.exit === 0 ? "ok" : result.exit === 1 ? "bad" : "warn";
  };

  function wire() {
    const context = json("heldout-context");
    const passportText = json("heldout-passport");
    if (context && typeof passportText === "string") {
      const button = document.getElementById("verify-button");
      const now = document.getElementById("verify-now");
      const output = document.getElementById("verify-result");
      output.textContent = `ready: checks at ${context.at} (the site's reference time) unless you choose the browser's clock`;
      button.disabled = false;
      now.disabled = false;
      button.addEventListener("click", async () => {
        output.textContent = "verifying…";
        show(output, await verifyPassport(passportText, { ledger: context.ledger, at: context.at }));
      });
      now.addEventListener("click", async () => {
        output.textContent = "verifying…";
        const at = new Date().toISOString().slice(0, 19) + "Z";
        const result = await verifyPassport(passportText, { ledger: context.ledger, at });
        show(output, { exit: result.exit, text: `${result.text} (checked at ${at})` });
      });
      const copyButton = document.getElementById("copy-verify");
      copyButton.disabled = false;
      copyButton.addEventListener("click", async () => {
        const copyOutput = document.getElementById("copy-result");
        const text = document.getElementById("copy-text").value;
        const key = document.getElementById("copy-key").value.trim();
        let ledger = context.ledger;
        try {
          const doc = parseJsonObject(text, "passport");
          if (key && !isObject(get(get(doc, "computed"), "heldout"))) ledger = null;
        } catch (e) { /* reported by verifyPassport */ }
        show(copyOutput, await verifyPassport(text, { key: key || null, ledger, at: context.at }));
      });
    }
    const entries = json("heldout-entries");
    if (entries) {
      for (const button of document.querySelectorAll("button.verify-entry")) {
        button.disabled = false;
        button.addEventListener("click", async () => {
          const index = Number(button.dataset.index);
          show(document.getElementById(`v${index}`), await verifyEntry(index, entries));
        });
      }
    }
  }

  window.heldoutVerify = { passport: verifyPassport, entry: verifyEntry, jcs: jcsText, round6, parseUtc, formatUtc,
    parseJson: (text) => parseJson(text, "document"), parseCheckpoint };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
