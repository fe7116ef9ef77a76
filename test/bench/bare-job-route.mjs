// The baseline of test/bench/api.bench.ts: a bare route on the API's framework (Fastify 5)
// doing the same Redis read as GET /v1/jobs/{id} (HGETALL of the job's hash), without auth,
// validation, rate limiting or a response schema. Prints its port once listening.
//
//   REDIS_URL=redis://… node test/bench/bare-job-route.mjs
import Fastify from 'fastify';
import { Redis } from 'ioredis';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const app = Fastify({ logger: false });
app.get('/bare/jobs/:id', async (request, reply) => {
  const hash = await redis.hgetall(`job:{${request.params.id}}`);
  if (Object.keys(hash).length === 0) return reply.code(404).send({ detail: 'not found' });
  return hash;
});
await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${app.server.address().port}\n`);
process.on('SIGTERM', async () => {
  await app.close();
  redis.disconnect();
  process.exit(0);
});
