import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { RunCodeOutput, runCodeTool } from './run-code-tool.js';
import { runCommandTool } from './run-command-tool.js';
import type { SandboxHost } from './sandbox-host.js';
import { SandboxSession } from './sandbox-session.js';
import { toolError } from './tool-errors.js';
import * as S from './tool-schemas.js';

export const MCP_SERVER_NAME = 'sandstream';

type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

const INSTRUCTIONS = `Sandstream runs commands and file operations in throwaway sandboxes (containers).
Start with create_sandbox (it answers a sandboxId), then run_command, run_code (a stateful Python interpreter), read_file, write_file, list_files and grep on it; close_sandbox when done.
Sandboxes this connection created are closed when it ends, unless created with keep: true.`;

/** A tool's answer: its structured content, and the same as JSON text for clients that read only text. */
function answer(structured: Record<string, unknown>, text?: string): CallToolResult {
  return {
    content: [{ type: 'text', text: text ?? JSON.stringify(structured) }],
    structuredContent: structured,
  };
}

/**
 * The MCP server of one connection: every Sandstream tool, on `host`, with the sandboxes this
 * connection creates tracked in `session` (closed when the connection ends, unless kept). The
 * one definition of the tools, served over stdio by `sandstream mcp` and over Streamable HTTP
 * by the API's /mcp. A failing call is a tool result with isError and a message naming the
 * problem, never a protocol error: the model reads it and can act on it.
 */
export function createSandstreamMcpServer(
  host: SandboxHost,
  options: { version?: string } = {},
): { server: McpServer; session: SandboxSession } {
  const server = new McpServer(
    { name: MCP_SERVER_NAME, version: options.version ?? '0.1.0' },
    { instructions: INSTRUCTIONS, capabilities: { tools: {} } },
  );
  const session = new SandboxSession(host);
  const guard =
    <A>(fn: (args: A, extra: ToolExtra) => Promise<CallToolResult>) =>
    async (args: A, extra: ToolExtra): Promise<CallToolResult> => {
      try {
        return await fn(args, extra);
      } catch (err) {
        return toolError(err, host.describe?.bind(host));
      }
    };

  server.registerTool(
    'create_sandbox',
    {
      title: 'Create a sandbox',
      description:
        'Creates a sandbox (a throwaway container) and waits until it takes commands. Answers its sandboxId. Closed when this connection ends unless keep is true.',
      inputSchema: S.CreateSandboxInput,
      outputSchema: S.CreateSandboxOutput,
    },
    guard(async ({ keep, ...spec }) => {
      const sandboxId = await host.create(spec);
      session.add(sandboxId, keep === true);
      return answer({ sandboxId, kept: keep === true });
    }),
  );

  server.registerTool(
    'run_code',
    {
      title: 'Run code in a stateful interpreter',
      description:
        'Runs a cell of Python (or JavaScript, or bash) in the sandbox’s code interpreter, which keeps variables and imports between calls of one context, as a notebook does. Answers its output, the value of its last expression, plots as images and tables as HTML, and an exception with its traceback. A timeout interrupts the cell and keeps the state.',
      inputSchema: S.RunCodeInput,
      outputSchema: RunCodeOutput,
    },
    guard((args, extra) => runCodeTool(host, args, extra)),
  );

  server.registerTool(
    'run_command',
    {
      title: 'Run a shell command',
      description:
        'Runs one shell command line (/bin/sh -c) in the sandbox and answers its exit code, stdout and stderr (long output keeps its start and end; the cut is said). A non-zero exit code is a normal answer; a timeout is an error. background: true starts it and answers at once.',
      inputSchema: S.RunCommandInput,
      outputSchema: S.RunCommandOutput,
    },
    guard((args, extra) => runCommandTool(host, args, extra)),
  );

  server.registerTool(
    'read_file',
    {
      title: 'Read a file',
      description:
        'A text file of the sandbox (UTF-8, up to 1 MiB); a path relative to its workspace or absolute.',
      inputSchema: S.ReadFileInput,
      outputSchema: S.ReadFileOutput,
      annotations: { readOnlyHint: true },
    },
    guard(async ({ sandboxId, path }) => {
      const content = await (await host.sandbox(sandboxId)).files.read(path);
      return { content: [{ type: 'text', text: content }], structuredContent: { path, content } };
    }),
  );

  server.registerTool(
    'write_file',
    {
      title: 'Write a file',
      description: 'Writes a whole text file in the sandbox (atomically; parent directories are created).',
      inputSchema: S.WriteFileInput,
      outputSchema: S.WriteFileOutput,
    },
    guard(async ({ sandboxId, path, content }) => {
      const bytesWritten = await (await host.sandbox(sandboxId)).files.write(path, content);
      return answer({ path, bytesWritten }, `wrote ${bytesWritten} bytes to ${path}`);
    }),
  );

  server.registerTool(
    'list_files',
    {
      title: 'List files',
      description: 'The entries of a directory of the sandbox (default: its workspace), to the given depth.',
      inputSchema: S.ListFilesInput,
      outputSchema: S.ListFilesOutput,
      annotations: { readOnlyHint: true },
    },
    guard(async ({ sandboxId, path, depth }) => {
      const listed = await (await host.sandbox(sandboxId)).files.list(
        path ?? '.',
        depth !== undefined ? { maxDepth: depth } : {},
      );
      const lines = listed.entries.map(
        (e) => `${e.type === 'directory' ? `${e.path}/` : e.path}\t${e.sizeBytes}`,
      );
      if (listed.truncated) lines.push('[… more entries not listed]');
      return answer({ entries: listed.entries, truncated: listed.truncated }, lines.join('\n') || '(empty)');
    }),
  );

  server.registerTool(
    'grep',
    {
      title: 'Search files',
      description: 'Lines matching a regular expression in the sandbox’s files (default: its workspace).',
      inputSchema: S.GrepInput,
      outputSchema: S.GrepOutput,
      annotations: { readOnlyHint: true },
    },
    guard(async ({ sandboxId, pattern, path }) => {
      const found = await (await host.sandbox(sandboxId)).files.grep(
        pattern,
        path !== undefined ? { path } : {},
      );
      const lines = found.matches.map((m) => `${m.path}:${m.line}:${m.text}`);
      if (found.truncated) lines.push('[… more matches not shown]');
      return answer(
        { matches: found.matches, truncated: found.truncated },
        lines.join('\n') || '(no matches)',
      );
    }),
  );

  server.registerTool(
    'list_sandboxes',
    {
      title: 'List sandboxes',
      description: 'Your sandboxes, newest first, optionally only those with all the given labels.',
      inputSchema: S.ListSandboxesInput,
      outputSchema: S.ListSandboxesOutput,
      annotations: { readOnlyHint: true },
    },
    guard(async ({ labels }) => {
      const sandboxes = (await host.list(labels)).map((r) => ({
        sandboxId: r.id,
        state: r.state,
        ...(r.spec.image !== undefined ? { image: r.spec.image } : {}),
        ...(r.spec.template !== undefined ? { template: r.spec.template } : {}),
        labels: r.spec.labels ?? {},
        createdByThisSession: session.has(r.id),
      }));
      return answer({ sandboxes });
    }),
  );

  server.registerTool(
    'close_sandbox',
    {
      title: 'Close a sandbox',
      description: 'Closes a sandbox: everything still running in it is killed and its files go.',
      inputSchema: S.CloseSandboxInput,
      outputSchema: S.CloseSandboxOutput,
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    guard(async ({ sandboxId }) => {
      const closed = await host.close(sandboxId);
      session.forget(sandboxId);
      return answer({ sandboxId, state: closed.state }, `sandbox ${sandboxId} is ${closed.state}`);
    }),
  );

  server.registerTool(
    'snapshot_sandbox',
    {
      title: 'Snapshot a sandbox',
      description:
        'Captures the sandbox’s files into a snapshot; answers its snapshotId (restore_snapshot takes it).',
      inputSchema: S.SnapshotSandboxInput,
      outputSchema: S.SnapshotSandboxOutput,
    },
    guard(async ({ sandboxId, name }) => {
      const taken = await (await host.sandbox(sandboxId)).snapshot(name !== undefined ? { name } : {});
      return answer({
        snapshotId: taken.snapshotId,
        ...(taken.name !== undefined ? { name: taken.name } : {}),
        sizeBytes: taken.sizeBytes,
        ...(taken.entries !== undefined ? { entries: taken.entries } : {}),
      });
    }),
  );

  server.registerTool(
    'restore_snapshot',
    {
      title: 'Restore a snapshot',
      description:
        'Makes the sandbox’s files exactly a snapshot’s (what was added since goes); commands still running are stopped first.',
      inputSchema: S.RestoreSnapshotInput,
      outputSchema: S.RestoreSnapshotOutput,
      annotations: { destructiveHint: true },
    },
    guard(async ({ sandboxId, snapshotId }) => {
      const restored = await (await host.sandbox(sandboxId)).restore(snapshotId);
      return answer({
        snapshotId: restored.snapshotId,
        stoppedCommands: restored.stoppedCommands,
        entries: restored.entries,
        removed: restored.removed,
      });
    }),
  );

  server.registerTool(
    'get_preview_url',
    {
      title: 'Preview URL of a port',
      description:
        'A URL that opens a port a server in the sandbox listens on (private by its token unless public is true).',
      inputSchema: S.PreviewUrlInput,
      outputSchema: S.PreviewUrlOutput,
    },
    guard(async ({ sandboxId, port, public: open }) => {
      const url = await host.previewUrl(sandboxId, port, open === true);
      return answer({ url }, url);
    }),
  );

  return { server, session };
}
