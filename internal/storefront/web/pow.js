// The waiting room's proof of work, run in a Web Worker so the page stays
// responsive: find a nonce such that the SHA-256 of challenge + ":" + nonce
// starts with `bits` zero bits (docs/api.md, "Challenge"). Web Crypto's digest
// is asynchronous, so digests are asked for in batches and awaited
// together: one at a time would spend most of the time waiting.
// In: {challenge, bits}. Out: {nonce, tries} or {error}.
"use strict";

const BATCH = 512;

// leadingZeros tells whether the digest starts with `bits` zero bits.
function leadingZeros(digest, bits) {
  const b = new Uint8Array(digest);
  let i = 0;
  for (; bits >= 8; bits -= 8, i++) if (b[i] !== 0) return false;
  return bits === 0 || (b[i] >> (8 - bits)) === 0;
}

async function solve(challenge, bits) {
  const enc = new TextEncoder();
  // Nonces are a random prefix and a counter in base 36: visible ASCII,
  // well under the 64 characters allowed.
  const prefix = Math.floor(Math.random() * 2 ** 32).toString(36) + "-";
  for (let n = 0; ; n += BATCH) {
    const nonces = [];
    const digests = [];
    for (let k = 0; k < BATCH; k++) {
      const nonce = prefix + (n + k).toString(36);
      nonces.push(nonce);
      digests.push(crypto.subtle.digest("SHA-256", enc.encode(challenge + ":" + nonce)));
    }
    const done = await Promise.all(digests);
    for (let k = 0; k < BATCH; k++) {
      if (leadingZeros(done[k], bits)) return { nonce: nonces[k], tries: n + k + 1 };
    }
  }
}

self.onmessage = async (ev) => {
  const { challenge, bits } = ev.data || {};
  if (!self.crypto || !crypto.subtle) {
    self.postMessage({ error: "This browser offers no Web Crypto here (it needs HTTPS)." });
    return;
  }
  try {
    self.postMessage(await solve(String(challenge), Number(bits) || 0));
  } catch (err) {
    self.postMessage({ error: String(err && err.message || err) });
  }
};
