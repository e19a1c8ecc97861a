// An upload one byte over the sidecar's 100 MB limit, sent by Node's fetch, which does not
// wait for 100-continue: it is still sending when modelgate answers, and must get the 413
// rather than a broken pipe.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openAsBlob } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Plain fetch: no npm package is needed, so the environment is read here (TestNodeClient sets it).
const gatewayURL = process.env.MODELGATE_URL;
const gatewayKey = process.env.MODELGATE_KEY;

const limit = 100 * 1000 * 1000; // server.max_upload_bytes' default
const assets = `${gatewayURL}/api/open/v2/assets`;

// expect413 checks the answer is the platform envelope's refusal of a file too large.
async function expect413(res) {
  const text = await res.text();
  assert.equal(res.status, 413, text);
  const body = JSON.parse(text);
  assert.equal(body.code, 1);
  assert.match(body.msg, /too large/);
}

async function streamUpload(fileBytes) {
  const boundary = 'mgNodeUpload9f3';
  const enc = new TextEncoder();
  const head = enc.encode(`--${boundary}\r\nContent-Disposition: form-data; name="media_type"\r\n\r\nfile\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n` +
    'Content-Type: application/octet-stream\r\n\r\n');
  const tail = enc.encode(`\r\n--${boundary}--\r\n`);
  const block = new Uint8Array(64 * 1024).fill(0x61);
  let left = fileBytes;
  let sentHead = false;
  let sentTail = false;
  // Generated as it is pulled: never more than one block held.
  const body = new ReadableStream({
    pull(controller) {
      if (!sentHead) {
        sentHead = true;
        controller.enqueue(head);
      } else if (left > 0) {
        const n = Math.min(left, block.length);
        left -= n;
        controller.enqueue(n === block.length ? block : block.subarray(0, n));
      } else if (!sentTail) {
        sentTail = true;
        controller.enqueue(tail);
      } else {
        controller.close();
      }
    },
  });
  const res = await fetch(assets, {
    method: 'POST',
    headers: { Authorization: `Bearer ${gatewayKey}`, 'Content-Type': `multipart/form-data; boundary=${boundary}` },
    body,
    duplex: 'half',
  });
  await expect413(res);
}

async function formUpload(fileBytes) {
  const dir = await mkdtemp(join(tmpdir(), 'mg-upload-'));
  try {
    const path = join(dir, 'big.bin');
    const f = await open(path, 'w');
    await f.truncate(fileBytes); // sparse: nothing is written or held
    await f.close();
    const form = new FormData();
    form.append('media_type', 'file');
    form.append('file', await openAsBlob(path), 'big.bin');
    const res = await fetch(assets, { method: 'POST', headers: { Authorization: `Bearer ${gatewayKey}` }, body: form });
    await expect413(res);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('fetch streaming 100 MB + 1 byte (chunked) gets the 413', () => streamUpload(limit + 1));
test('fetch FormData of a 100 MB + 1 byte file (Content-Length) gets the 413', () => formUpload(limit + 1));
test('fetch streaming 120 MB (chunked) gets the 413', () => streamUpload(limit + 20_000_000));
test('fetch FormData of a 150 MB file, refused on its Content-Length, gets the 413', () => formUpload(limit + 50_000_000));
