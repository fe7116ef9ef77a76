import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { type DescriptorProto, FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { afterAll, describe, expect, it } from 'vitest';
import { file_filesystem_filesystem } from '../gen/filesystem/filesystem_pb.js';
import { file_process_process } from '../gen/process/process_pb.js';

const api = join(dirname(fileURLToPath(import.meta.url)), '../..');
const require = createRequire(import.meta.url);

/** Every .ts file under `dir`, by its path below it. */
async function tree(dir: string, below = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const entry of await readdir(join(dir, below), { withFileTypes: true })) {
    const path = join(below, entry.name);
    if (entry.isDirectory()) for (const [p, text] of await tree(dir, path)) out.set(p, text);
    else out.set(path, await readFile(join(dir, path), 'utf8'));
  }
  return out;
}

/**
 * A file's wire contract, one line per field (message, name, number, type, label, message type,
 * oneof), enum value and method (its streams): what a client and a server must agree on.
 */
function contract(serialized: Uint8Array): string[] {
  const file = fromBinary(FileDescriptorProtoSchema, serialized);
  const lines: string[] = [];
  const message = (m: DescriptorProto, outer: string) => {
    const name = `${outer}${m.name}`;
    for (const f of m.field)
      lines.push(`${name}.${f.name}=${f.number} ${f.type}/${f.label} ${f.typeName} ${f.oneofIndex ?? '-'}`);
    for (const e of m.enumType)
      for (const v of e.value) lines.push(`${name}.${e.name}.${v.name}=${v.number}`);
    for (const nested of m.nestedType) message(nested, `${name}.`);
  };
  for (const m of file.messageType) message(m, '');
  for (const e of file.enumType) for (const v of e.value) lines.push(`${e.name}.${v.name}=${v.number}`);
  for (const s of file.service)
    for (const m of s.method)
      lines.push(
        `${s.name}.${m.name}(${m.clientStreaming ? 'stream ' : ''}${m.inputType}) ${m.serverStreaming ? 'stream ' : ''}${m.outputType}`,
      );
  return lines.sort();
}

describe('the code generated from proto/', () => {
  const temp = mkdtemp(join(tmpdir(), 'e2b-gen-'));
  afterAll(async () => rm(await temp, { recursive: true, force: true }));

  it('is what buf.gen.yaml makes of the .proto files now (run `npm run generate -w @sandstream/api`)', async () => {
    const out = await temp;
    // buf and protoc-gen-es from the workspace's devDependencies, no network.
    const bin = join(dirname(require.resolve('@bufbuild/buf/package.json')), '..', '..', '.bin');
    await promisify(execFile)(join(bin, 'buf'), ['generate', '--output', out], {
      cwd: api,
      env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` },
    });
    const fresh = await tree(join(out, 'src/gen'));
    const committed = await tree(join(api, 'src/gen'));
    expect([...committed.keys()].sort()).toEqual([...fresh.keys()].sort());
    for (const [path, text] of fresh) expect(committed.get(path), path).toBe(text);
  }, 60_000);

  it("speaks the e2b SDK's wire contract: the same fields, numbers, types and methods", async () => {
    // The SDK bundles its generated descriptors (serialized FileDescriptorProtos) in its build.
    const bundle = await readFile(require.resolve('e2b').replace(/\.js$/, '.mjs'), 'utf8');
    const theirs = [...bundle.matchAll(/fileDesc\("([A-Za-z0-9+/=]+)"/g)].map((m) =>
      Buffer.from(m[1] ?? '', 'base64'),
    );
    const byName = new Map(theirs.map((bytes) => [fromBinary(FileDescriptorProtoSchema, bytes).name, bytes]));
    for (const ours of [file_process_process.proto, file_filesystem_filesystem.proto]) {
      const sdk = byName.get(ours.name);
      expect(sdk, `${ours.name} in the e2b SDK`).toBeDefined();
      expect(contract(toBinary(FileDescriptorProtoSchema, ours)), ours.name).toEqual(contract(sdk!));
    }
  });
});
