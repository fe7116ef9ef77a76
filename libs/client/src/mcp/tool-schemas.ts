import { LiveSandboxSpecSchema } from '@sandstream/bus';
import {
  CodeContextIdSchema,
  CodeLanguageSchema,
  FileEntrySchema,
  GrepMatchSchema,
  Limits,
  strictObject,
  withoutNul,
} from '@sandstream/wire';
import { z } from 'zod';
import { ExecOptionsSchema, GrepOptionsSchema, ListFilesOptionsSchema } from '../sandbox-options.js';
import { PortNumberSchema } from '../sandbox-ports.js';
import { SnapshotOptionsSchema } from '../snapshots.js';

// The MCP tools' input and output shapes, built from the SDK's and the bus' own zod schemas so
// a tool takes exactly what the SDK call behind it takes, with the same limits and messages. The
// MCP SDK turns these shapes into each tool's JSON Schema and validates every call against them.

const spec = LiveSandboxSpecSchema.shape;
const exec = ExecOptionsSchema.shape;

const sandboxId = z
  .string()
  .min(1, 'sandboxId must not be empty')
  .max(256, 'sandboxId is at most 256 characters')
  .describe('The sandbox, as create_sandbox or list_sandboxes named it');
const path = withoutNul(z.string().min(1, 'path must not be empty').max(4096), 'path');

export const CreateSandboxInput = strictObject(
  {
    image: spec.image.describe(
      'Container image to run (default: the operator’s default, where there is one)',
    ),
    template: spec.template.describe('An operator template by name, instead of an image'),
    labels: z.record(z.string(), z.string()).optional().describe('Labels to find it by (list_sandboxes)'),
    env: z
      .record(withoutNul(z.string(), 'an environment name'), withoutNul(z.string(), 'an environment value'))
      .optional()
      .describe('Environment of every command in it (no secrets: it travels through Redis)'),
    idleTimeoutSeconds: spec.idleTimeoutSeconds
      .unwrap()
      .optional()
      .describe('Closed after this long with no call and no command running (default 600)'),
    keep: z
      .boolean()
      .optional()
      .describe('Keep it after this MCP client disconnects (default: closed with the connection)'),
  },
  { idleTimeout: 'did you mean "idleTimeoutSeconds"?', timeoutSeconds: 'did you mean "idleTimeoutSeconds"?' },
);
export const CreateSandboxOutput = { sandboxId: z.string(), kept: z.boolean() };

export const RunCommandInput = strictObject(
  {
    sandboxId,
    command: withoutNul(
      z
        .string()
        .min(1, 'command must not be empty')
        .max(256 * 1024),
      'command',
    ).describe('One shell command line, run by /bin/sh -c in the sandbox’s workspace'),
    cwd: exec.cwd.describe('Working directory (relative to the workspace, or absolute)'),
    env: exec.env.describe('Environment merged over the sandbox’s'),
    timeoutSeconds: exec.timeoutSeconds.describe(
      `Killed after this long (default ${Limits.runDefaultTimeoutSeconds} s, at most ${Limits.runMaxTimeoutSeconds})`,
    ),
    background: z
      .boolean()
      .optional()
      .describe(
        'Start it and answer at once with its process id (a server, a watcher); it runs until it exits or the sandbox closes',
      ),
  },
  {
    cmd: 'did you mean "command"?',
    args: 'command is one shell command line',
    timeout: 'did you mean "timeoutSeconds"? timeouts are in seconds',
    workingDirectory: 'did you mean "cwd"?',
    id: 'did you mean "sandboxId"?',
  },
);
export const RunCommandOutput = {
  commandId: z.string(),
  exitCode: z.number().int().nullable().optional(),
  stdout: z.string().optional(),
  stderr: z.string().optional(),
  timedOut: z.boolean().optional(),
  cancelled: z.boolean().optional(),
  durationMs: z.number().optional(),
  /** Bytes cut out of the middle of stdout / stderr (head and tail kept). */
  stdoutOmittedBytes: z.number().int().optional(),
  stderrOmittedBytes: z.number().int().optional(),
  background: z.boolean().optional(),
};

export const RunCodeInput = strictObject(
  {
    sandboxId,
    code: z
      .string()
      .min(1, 'code must not be empty')
      .max(Limits.codeMaxBytes)
      .describe('The cell: Python by default; the value of its last expression is the main result'),
    language: CodeLanguageSchema.optional().describe('python (default), javascript or bash'),
    context: CodeContextIdSchema.optional().describe(
      'A name for a separate state (variables, imports); absent: the language’s default context',
    ),
    timeoutSeconds: exec.timeoutSeconds.describe(
      'The cell is interrupted then (KeyboardInterrupt); the context keeps its state',
    ),
  },
  { lang: 'did you mean "language"?', timeout: 'did you mean "timeoutSeconds"? timeouts are in seconds' },
);

export const ReadFileInput = strictObject(
  { sandboxId, path: path.describe('File to read (UTF-8 text)') },
  { id: 'did you mean "sandboxId"?', file: 'did you mean "path"?' },
);
export const ReadFileOutput = { path: z.string(), content: z.string() };

export const WriteFileInput = strictObject(
  {
    sandboxId,
    path: path.describe('File to write (parent directories are created)'),
    content: z.string().describe('The whole new content, as UTF-8 text'),
  },
  { id: 'did you mean "sandboxId"?', file: 'did you mean "path"?', text: 'did you mean "content"?' },
);
export const WriteFileOutput = { path: z.string(), bytesWritten: z.number().int() };

export const ListFilesInput = strictObject(
  {
    sandboxId,
    path: path.optional().describe('Directory to list (default: the workspace)'),
    depth: ListFilesOptionsSchema.shape.maxDepth.describe('How deep to go (default 1)'),
  },
  { id: 'did you mean "sandboxId"?', maxDepth: 'did you mean "depth"?' },
);
export const ListFilesOutput = { entries: z.array(FileEntrySchema), truncated: z.boolean() };

export const GrepInput = strictObject(
  {
    sandboxId,
    pattern: z
      .string()
      .min(1, 'pattern must not be empty')
      .max(4096)
      .describe('Regular expression to search for'),
    path: GrepOptionsSchema.shape.path.describe('File or directory to search (default: the workspace)'),
  },
  { id: 'did you mean "sandboxId"?', query: 'did you mean "pattern"?' },
);
export const GrepOutput = { matches: z.array(GrepMatchSchema), truncated: z.boolean() };

export const ListSandboxesInput = strictObject(
  {
    labels: z
      .record(z.string(), z.string())
      .optional()
      .describe('Only sandboxes carrying all of these labels'),
  },
  { label: 'did you mean "labels"?' },
);
export const ListSandboxesOutput = {
  sandboxes: z.array(
    z.object({
      sandboxId: z.string(),
      state: z.string(),
      image: z.string().optional(),
      template: z.string().optional(),
      labels: z.record(z.string(), z.string()),
      createdByThisSession: z.boolean(),
    }),
  ),
};

export const CloseSandboxInput = strictObject({ sandboxId }, { id: 'did you mean "sandboxId"?' });
export const CloseSandboxOutput = { sandboxId: z.string(), state: z.string() };

export const SnapshotSandboxInput = strictObject(
  { sandboxId, name: SnapshotOptionsSchema.shape.name },
  { id: 'did you mean "sandboxId"?' },
);
export const SnapshotSandboxOutput = {
  snapshotId: z.string(),
  name: z.string().optional(),
  sizeBytes: z.number(),
  entries: z.number().optional(),
};

export const RestoreSnapshotInput = strictObject(
  {
    sandboxId,
    snapshotId: z.string().min(1).max(256).describe('A snapshot of this tenant (snapshot_sandbox named it)'),
  },
  { id: 'did you mean "sandboxId"?' },
);
export const RestoreSnapshotOutput = {
  snapshotId: z.string(),
  stoppedCommands: z.array(z.string()),
  entries: z.number(),
  removed: z.number(),
};

export const PreviewUrlInput = strictObject(
  {
    sandboxId,
    port: PortNumberSchema.describe('The port a server in the sandbox listens on'),
    public: z.boolean().optional().describe('Open to anyone with the URL (default: private, by its token)'),
  },
  { id: 'did you mean "sandboxId"?' },
);
export const PreviewUrlOutput = { url: z.string() };
