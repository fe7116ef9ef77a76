/**
 * The JavaScript kernel: a runner the agent starts on the image's own `node` as `node -e <this>`
 * (the user's code never runs inside the agent: a runaway cell would stall it, and the agent's
 * Node is a trimmed single executable). Cells run in one persistent `vm` context, so top-level
 * declarations stay for the next cell; the completion value of the cell is its main result, and a
 * promise is awaited first. Same protocol as the Python runner (python-runner.ts). SIGINT breaks
 * a synchronous loop (vm's breakOnSigint) or stops waiting for a pending promise.
 */
export const JAVASCRIPT_RUNNER = String.raw`
'use strict';
const fs = require('node:fs');
const net = require('node:net');
const readline = require('node:readline');
const { Writable } = require('node:stream');
const util = require('node:util');
const vm = require('node:vm');

let current = null;
function send(message) {
  const data = Buffer.from(JSON.stringify(message) + '\n');
  let offset = 0;
  while (offset < data.length) {
    try {
      offset += fs.writeSync(4, data, offset);
    } catch (err) {
      if (err.code !== 'EAGAIN') throw err;
    }
  }
}
function stream(name) {
  return new Writable({
    write(chunk, _encoding, callback) {
      send({ type: 'stream', id: current, name, text: chunk.toString() });
      callback();
    },
  });
}
const cellConsole = new console.Console({ stdout: stream('stdout'), stderr: stream('stderr') });

function bundle(value, isMainResult) {
  const message = { type: 'result', id: current, isMainResult, text: util.inspect(value) };
  if (value !== null && typeof value === 'object' && (Array.isArray(value) || Object.getPrototypeOf(value) === null || value.constructor?.name === 'Object')) {
    try {
      message.json = JSON.parse(JSON.stringify(value));
    } catch {}
  }
  return message;
}
function display(...values) {
  for (const value of values) send(bundle(value, false));
}

const context = vm.createContext({
  console: cellConsole, display, require, process, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate, queueMicrotask,
  structuredClone, fetch: globalThis.fetch, AbortController, performance,
});

let interruptPending = null;
process.on('SIGINT', () => {
  // Outside a synchronous run (vm's breakOnSigint covers those): stop waiting for a promise.
  if (interruptPending) interruptPending(new Error('Script execution was interrupted by SIGINT'));
});

function errorOf(err) {
  if (err instanceof Error || (err && typeof err === 'object' && 'stack' in err)) {
    return { name: String(err.name ?? 'Error'), value: String(err.message ?? ''), traceback: String(err.stack ?? err) };
  }
  return { name: 'Error', value: util.inspect(err), traceback: 'Uncaught ' + util.inspect(err) };
}

let count = 0;
async function execute(request) {
  current = request.id;
  count += 1;
  let error = null;
  try {
    const script = new vm.Script(request.code, { filename: '<cell-' + count + '>' });
    let value = script.runInContext(context, { breakOnSigint: true, displayErrors: false });
    if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
      value = await new Promise((resolve, reject) => {
        interruptPending = reject;
        value.then(resolve, reject);
      }).finally(() => { interruptPending = null; });
    }
    if (value !== undefined) send(bundle(value, true));
  } catch (err) {
    error = errorOf(err);
  }
  send({ type: 'done', id: current, error });
}

process.on('uncaughtException', (err) => {
  process.stderr.write('Uncaught ' + util.inspect(err) + '\n');
});
process.on('unhandledRejection', (err) => {
  process.stderr.write('Unhandled rejection: ' + util.inspect(err) + '\n');
});

let queue = Promise.resolve();
const lines = readline.createInterface({ input: new net.Socket({ fd: 3, readable: true, writable: false }) });
lines.on('line', (line) => {
  const request = JSON.parse(line);
  queue = queue.then(() => execute(request));
});
lines.on('close', () => process.exit(0));
send({ type: 'ready', pid: process.pid });
`;
