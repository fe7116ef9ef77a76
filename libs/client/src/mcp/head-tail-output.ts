/**
 * One stream of a command's output as a model is shown it: the first `headBytes` and the last
 * `tailBytes` kept whole (the start says what ran, the end how it ended), what lies between
 * counted and cut. Memory stays at head + tail whatever the command prints.
 */
export class HeadTailOutput {
  private head = '';
  private headBytes = 0;
  private readonly tail: string[] = [];
  private tailBytes = 0;
  /** Bytes dropped from the middle. */
  omittedBytes = 0;

  constructor(
    private readonly maxHeadBytes: number,
    private readonly maxTailBytes: number,
  ) {}

  /** A line as the SDK delivers it (without its newline). */
  add(line: string): void {
    let text = `${line}\n`;
    let bytes = Buffer.byteLength(text);
    if (bytes > this.maxTailBytes && this.headBytes + bytes > this.maxHeadBytes) {
      // One line longer than the tail: its end is kept (characters, so no UTF-8 sequence is split).
      const kept = text.slice(-this.maxTailBytes);
      const keptBytes = Buffer.byteLength(kept);
      this.omittedBytes += bytes - keptBytes;
      text = kept;
      bytes = keptBytes;
    }
    if (this.omittedBytes === 0 && this.tail.length === 0 && this.headBytes + bytes <= this.maxHeadBytes) {
      this.head += text;
      this.headBytes += bytes;
      return;
    }
    this.tail.push(text);
    this.tailBytes += bytes;
    while (this.tailBytes > this.maxTailBytes && this.tail.length > 0) {
      const dropped = this.tail.shift() as string;
      const droppedBytes = Buffer.byteLength(dropped);
      this.tailBytes -= droppedBytes;
      this.omittedBytes += droppedBytes;
    }
  }

  /** The text kept, with the cut said where it is. */
  text(): string {
    if (this.omittedBytes === 0) return this.head + this.tail.join('');
    return `${this.head}[… ${this.omittedBytes} bytes of output cut here; the first ${this.headBytes} and last ${this.tailBytes} bytes are shown …]\n${this.tail.join('')}`;
  }
}
