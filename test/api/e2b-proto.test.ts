import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fromBinary } from '@bufbuild/protobuf';
import { type DescriptorProto, FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';

// The .proto files the E2B API's Connect handlers follow (services/api/proto) name every message,
// field and enum value as the unmodified e2b SDK's own descriptors do, with the same numbers:
// the JSON names our handlers read and write come from these.

const protoDir = new URL('../../services/api/proto/', import.meta.url);

/** `Message.Nested.field` → number, and `Enum.VALUE` → number, of a .proto file's text. */
function protoNumbers(text: string): Map<string, number> {
  const numbers = new Map<string, number>();
  const scopes: { name: string; kind: string }[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    const open = /^(message|enum|oneof|service)\s+(\w+)\s*\{(\s*\})?$/.exec(line);
    if (open) {
      if (!open[3]) scopes.push({ name: open[2] as string, kind: open[1] as string });
      continue;
    }
    if (line === '}') {
      scopes.pop();
      continue;
    }
    const path = scopes.filter((s) => s.kind === 'message' || s.kind === 'enum').map((s) => s.name);
    const field = /^(?:repeated\s+|optional\s+)?(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*(\d+);$/.exec(line);
    const value = /^(\w+)\s*=\s*(-?\d+);$/.exec(line);
    if (field) numbers.set([...path, field[1]].join('.'), Number(field[2]));
    else if (value && scopes.at(-1)?.kind === 'enum')
      numbers.set([...path, value[1]].join('.'), Number(value[2]));
  }
  return numbers;
}

/** The same, of the SDK's embedded file descriptors. */
function sdkNumbers(file: string): Map<string, number> {
  const require = createRequire(import.meta.url);
  const bundle = readFileSync(require.resolve('e2b'), 'utf8');
  for (const match of bundle.matchAll(/fileDesc\)?\("([A-Za-z0-9+/=]+)"/g)) {
    const fd = fromBinary(FileDescriptorProtoSchema, Buffer.from(match[1] as string, 'base64'));
    if (fd.name !== file) continue;
    const numbers = new Map<string, number>();
    const walk = (message: DescriptorProto, path: string[]) => {
      const here = [...path, message.name];
      // Map fields' synthetic entry messages are the `map<…>` syntax, not messages of the file.
      if (message.options?.mapEntry) return;
      for (const f of message.field) numbers.set([...here, f.name].join('.'), f.number);
      for (const nested of message.nestedType) walk(nested, here);
      for (const e of message.enumType)
        for (const v of e.value) numbers.set([...here, e.name, v.name].join('.'), v.number);
    };
    for (const message of fd.messageType) walk(message, []);
    for (const e of fd.enumType) for (const v of e.value) numbers.set([e.name, v.name].join('.'), v.number);
    return numbers;
  }
  throw new Error(`the e2b package has no descriptor ${file}`);
}

describe('E2B .proto definitions', () => {
  for (const file of ['process/process.proto', 'filesystem/filesystem.proto']) {
    it(`${file} matches the SDK's names and numbers`, () => {
      const ours = protoNumbers(readFileSync(new URL(file, protoDir), 'utf8'));
      expect(ours.size).toBeGreaterThan(20);
      expect(Object.fromEntries([...ours].sort())).toEqual(Object.fromEntries([...sdkNumbers(file)].sort()));
    });
  }
});
