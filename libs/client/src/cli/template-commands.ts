import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BuiltTemplates, type KeySpace, type RedisClient, TemplateNameSchema } from '@sandstream/bus';
import type { SandstreamClient } from '../client.js';
import { ExitCodes } from './exit-codes.js';
import { type ParsedCommandLine, UsageError } from './flags.js';

// `sandstream template build <name> -f <Dockerfile> <dir>`, `template ls` and `template rm`:
// templates built with the Docker engine and registered in Redis, where every scheduler resolves
// them (libs/bus built-templates.ts says why there). Building writes Redis directly; listing and
// removing go through the SDK (client.templates), so over Redis or the API. On Kubernetes, images
// come from CI instead: docs/templates.md.

type Values = ParsedCommandLine['values'];

/** The repository every built template's image is tagged in; the tag is the image id's start. */
export const TEMPLATE_IMAGE_REPOSITORY = 'sandstream-template';

/** Checks the command line before anything connects: the name, the Dockerfile and the directory. */
export function templateBuildInputs(
  args: readonly string[],
  values: Values,
): { name: string; dockerfile: string; context: string } {
  const [name, context] = args;
  if (!name)
    throw new UsageError('template build needs a template name: template build <name> -f <Dockerfile> <dir>');
  const parsed = TemplateNameSchema.safeParse(name);
  if (!parsed.success) throw new UsageError(`template name "${name}": ${parsed.error.issues[0]?.message}`);
  if (!context)
    throw new UsageError(
      'template build needs a build directory: template build <name> -f <Dockerfile> <dir>',
    );
  const dir = resolve(context);
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory())
    throw new UsageError(`template build: ${context} is not a directory`);
  const dockerfile = resolve(values.file ?? join(dir, 'Dockerfile'));
  if (!statSync(dockerfile, { throwIfNoEntry: false })?.isFile())
    throw new UsageError(
      `template build: Dockerfile ${values.file ?? join(context, 'Dockerfile')} is not a file`,
    );
  return { name, dockerfile, context: dir };
}

/** Runs the docker CLI with its output on our stderr (the build's progress); resolves its exit code. */
function docker(args: string[]): Promise<number> {
  return new Promise((done, fail) => {
    // Its stdout too goes to our stderr: our stdout is the image alone, for IMAGE=$(sandstream …).
    const child = spawn('docker', args, { stdio: ['ignore', 2, 2] });
    child.once('error', (err: NodeJS.ErrnoException) =>
      fail(
        err.code === 'ENOENT'
          ? new Error(
              'template build needs the docker CLI (Debian: docker.io) on PATH and an engine it reaches',
            )
          : err,
      ),
    );
    child.once('close', (code) => done(code ?? 1));
  });
}

/**
 * Builds the image with the engine the docker CLI reaches (DOCKER_HOST honoured: the one the
 * Docker backend uses), tags it `sandstream-template/<name>:<id12>` (a rebuild gets its own tag,
 * so sandboxes of the previous build keep running theirs), and registers it. Prints the image.
 */
export async function templateBuild(
  redis: RedisClient,
  keys: KeySpace,
  inputs: { name: string; dockerfile: string; context: string },
): Promise<number> {
  const work = mkdtempSync(join(tmpdir(), 'sandstream-template-'));
  try {
    const idFile = join(work, 'image-id');
    const built = await docker(['build', '--file', inputs.dockerfile, '--iidfile', idFile, inputs.context]);
    if (built !== 0) {
      process.stderr.write(`sandstream: template build: docker build exited ${built}; nothing registered\n`);
      return ExitCodes.failed;
    }
    const imageId = readFileSync(idFile, 'utf8').trim();
    const image = `${TEMPLATE_IMAGE_REPOSITORY}/${inputs.name}:${imageId.replace(/^sha256:/, '').slice(0, 12)}`;
    if ((await docker(['tag', imageId, image])) !== 0) {
      process.stderr.write(`sandstream: template build: docker tag ${image} failed; nothing registered\n`);
      return ExitCodes.failed;
    }
    await new BuiltTemplates(redis, keys).register({
      name: inputs.name,
      image,
      imageId,
      builtAt: Date.now(),
    });
    process.stderr.write(`registered template ${inputs.name} (${image})\n`);
    process.stdout.write(`${image}\n`);
    return ExitCodes.succeeded;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * `template ls`: over HTTP the API's list (the operator's file and the built ones), over Redis the
 * built ones (the file is the services' own, not in Redis). A header row, then one per template.
 */
export async function templateList(client: SandstreamClient, values: Values): Promise<number> {
  const all = await client.templates.list();
  if (values.json) {
    process.stdout.write(`${JSON.stringify(all, null, 2)}\n`);
    return ExitCodes.succeeded;
  }
  const row = (name: string, source: string, image: string, created: string) =>
    `${name.padEnd(30)} ${source.padEnd(15)} ${image.padEnd(50)} ${created}\n`;
  process.stdout.write(row('NAME', 'SOURCE', 'IMAGE', 'CREATED'));
  for (const t of all)
    process.stdout.write(
      row(t.name, t.shadowed ? `${t.source} (shadowed)` : t.source, t.image ?? '-', t.createdAt ?? '-'),
    );
  return ExitCodes.succeeded;
}

/**
 * `template rm`: unregisters a built template; the image stays on the engine (sandboxes may still
 * run it). Not found: TemplateNotFoundError (exit 4); the file's: FileTemplateError (exit 1).
 */
export async function templateRemove(client: SandstreamClient, name: string): Promise<number> {
  await client.templates.delete(name);
  process.stderr.write(`removed template ${name}\n`);
  return ExitCodes.succeeded;
}
