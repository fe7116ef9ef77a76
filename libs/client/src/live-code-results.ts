import { type CodeResult, type CodeResultPiece, CodeResultSchema, Limits } from '@sandstream/wire';

/**
 * A code cell's results as its `result` events bring them, put back together from their pieces
 * (the agent cuts a result's JSON as it cuts long lines). A result whose pieces did not all
 * arrive in order (one dropped, or trimmed from the stream) is left out: the cell's final
 * `results` has it, and ResultDelivery hands it on from there.
 */
export class CodeResultPieces {
  private index = -1;
  private parts: string[] = [];
  private chars = 0;

  constructor(private readonly onResult: (index: number, result: CodeResult) => void) {}

  add(piece: CodeResultPiece): void {
    if (piece.piece === 0) this.reset(piece.index);
    else if (piece.index !== this.index || piece.piece !== this.parts.length) {
      this.reset(-1);
      return;
    }
    this.chars += piece.json.length;
    // No more than a cell may keep: a sandbox that says otherwise does not make this grow.
    if (this.chars > Limits.codeResultsMaxBytes) {
      this.reset(-1);
      return;
    }
    this.parts.push(piece.json);
    if (this.parts.length < piece.pieces) return;
    const index = this.index;
    const json = this.parts.join('');
    this.reset(-1);
    const result = parseResult(json);
    if (result) this.onResult(index, result);
  }

  private reset(index: number): void {
    this.index = index;
    this.parts = [];
    this.chars = 0;
  }
}

function parseResult(json: string): CodeResult | undefined {
  try {
    const parsed = CodeResultSchema.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Hands a cell's results to runCode's onResult exactly once each, in the order of `results`:
 * live as they arrive, and at the cell's end whatever did not (a result too big for the agent's
 * buffer, or missed). A result that comes live after one that was missed waits for the end
 * too, so that the order never changes.
 */
export class ResultDelivery {
  private next = 0;

  constructor(private readonly onResult: ((result: CodeResult) => void) | undefined) {}

  /** A result as the cell produced it, `index` its place in the cell's results. */
  live(index: number, result: CodeResult): void {
    if (index !== this.next) return;
    this.next += 1;
    this.onResult?.(result);
  }

  /** The cell ended with these results: the ones not handed on yet go now. */
  end(results: readonly CodeResult[]): void {
    for (; this.next < results.length; this.next += 1) this.onResult?.(results[this.next] as CodeResult);
  }
}
