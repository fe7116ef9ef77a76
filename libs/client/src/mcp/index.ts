// `@sandstream/client/mcp`: the MCP tools on any SandboxHost (services/api serves them over
// Streamable HTTP), and `sandstream mcp`'s stdio server.
export { clientSandboxHost, type SandboxDefaults, type SandboxHost } from './sandbox-host.js';
export { SandboxSession } from './sandbox-session.js';
export { createSandstreamMcpServer, MCP_SERVER_NAME } from './sandbox-tools.js';
export { serveStdio } from './stdio-server.js';
