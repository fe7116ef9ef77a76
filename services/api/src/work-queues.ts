import { type KeySpace, QueueNames, queueConnection, type RedisClient } from '@sandstream/bus';
import { Queue } from 'bullmq';

/**
 * The services' work queues as the API reads them (GET /v1/queues' figures, the admin
 * dashboard): made once for both, on a connection of their own (queueConnection: their scripts
 * stay off the connection every request uses).
 */
export class WorkQueues {
  readonly queues: Queue[];
  private readonly connection: RedisClient;

  constructor(redis: RedisClient, keys: KeySpace) {
    this.connection = queueConnection(redis);
    this.queues = Object.values(QueueNames).map(
      (name) => new Queue(name, { connection: this.connection, prefix: keys.bullPrefix }),
    );
    // A failed read reaches its caller as a failed request; without a listener BullMQ logs it.
    for (const queue of this.queues) queue.on('error', () => {});
  }

  async close(): Promise<void> {
    await Promise.all(this.queues.map((q) => q.close()));
    this.connection.disconnect();
  }
}
