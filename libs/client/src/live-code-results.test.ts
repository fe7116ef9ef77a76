import type { CodeResult, CodeResultPiece } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { CodeResultPieces, ResultDelivery } from './live-code-results.js';

function piecesOf(index: number, result: CodeResult, size: number): CodeResultPiece[] {
  const json = JSON.stringify(result);
  const parts: string[] = [];
  for (let start = 0; start < json.length; start += size) parts.push(json.slice(start, start + size));
  return parts.map((part, piece) => ({ index, piece, pieces: parts.length, json: part }));
}

describe('CodeResultPieces', () => {
  it('puts a result back together from its pieces, and leaves out one that lost a piece', () => {
    const got: [number, CodeResult][] = [];
    const pieces = new CodeResultPieces((index, result) => got.push([index, result]));
    const whole: CodeResult = { png: 'iVBOR'.repeat(100), isMainResult: false };
    const broken: CodeResult = { text: 'y'.repeat(300), isMainResult: false };
    const last: CodeResult = { text: '3', isMainResult: true };
    for (const piece of piecesOf(0, whole, 64)) pieces.add(piece);
    // Piece 1 of result 1 went missing (trimmed): nothing half-made comes out of it.
    for (const piece of piecesOf(1, broken, 64).filter((p) => p.piece !== 1)) pieces.add(piece);
    for (const piece of piecesOf(2, last, 64)) pieces.add(piece);
    expect(got).toEqual([
      [0, whole],
      [2, last],
    ]);
  });
});

describe('ResultDelivery', () => {
  it('tells each result once, in order: after a missed one, the rest wait for the end', () => {
    const told: string[] = [];
    const delivery = new ResultDelivery((result) => told.push(result.text ?? ''));
    const results: CodeResult[] = ['a', 'b', 'c', 'd'].map((text) => ({ text, isMainResult: false }));
    delivery.live(0, results[0] as CodeResult);
    delivery.live(0, results[0] as CodeResult);
    // 1 never came live; 2 did, and must not jump ahead of it.
    delivery.live(2, results[2] as CodeResult);
    expect(told).toEqual(['a']);
    delivery.end(results);
    expect(told).toEqual(['a', 'b', 'c', 'd']);
  });
});
