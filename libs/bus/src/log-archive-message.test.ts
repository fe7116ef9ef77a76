import { describe, expect, it } from 'vitest';
import { compareEntryIds, nextEntryId } from './log-archive-message.js';

describe('compareEntryIds', () => {
  it('orders Redis stream ids as numbers, part by part, exactly at 64 bits', () => {
    const ids = [
      '10-0',
      '9-5',
      '9-10',
      '1700000000000-0',
      '9-9',
      '18446744073709551615-1',
      '18446744073709551614-2',
    ];
    expect([...ids].sort(compareEntryIds)).toEqual([
      '9-5',
      '9-9',
      '9-10',
      '10-0',
      '1700000000000-0',
      '18446744073709551614-2',
      '18446744073709551615-1',
    ]);
    expect(compareEntryIds('5-3', '5-3')).toBe(0);
  });

  it('reads an id without its sequence part as sequence 0', () => {
    expect(compareEntryIds('7', '7-0')).toBe(0);
    expect(compareEntryIds('7', '7-1')).toBe(-1);
  });
});

describe('nextEntryId', () => {
  it('is the smallest id after the given one, past 2^53', () => {
    expect(nextEntryId('5-3')).toBe('5-4');
    expect(nextEntryId('18446744073709551615-9007199254740993')).toBe(
      '18446744073709551615-9007199254740994',
    );
  });
});
