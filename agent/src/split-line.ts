import { Limits } from '@sandstream/wire/lean';

/**
 * Splits a line longer than `maxBytes` of UTF-8 into pieces that each fit, without cutting a
 * surrogate pair in half. Every piece becomes its own event, so one enormous line (a minified
 * bundle printed to stdout) cannot make one huge stream entry or one huge buffer slot.
 */
export function splitLine(line: string, maxBytes: number = Limits.eventLineMaxBytes): string[] {
  if (fitsOneEvent(line, maxBytes)) return [line];
  const unitsPerPiece = Math.max(1, Math.floor(maxBytes / 3));
  const pieces: string[] = [];
  let start = 0;
  while (start < line.length) {
    let end = Math.min(start + unitsPerPiece, line.length);
    const last = line.charCodeAt(end - 1);
    if (end < line.length && last >= 0xd800 && last <= 0xdbff && end - 1 > start) end -= 1;
    pieces.push(line.slice(start, end));
    start = end;
  }
  return pieces;
}

/** True when `line` needs no splitting (the usual case, checked without allocating). */
export function fitsOneEvent(line: string, maxBytes: number = Limits.eventLineMaxBytes): boolean {
  // A UTF-16 code unit is at most 3 bytes of UTF-8, so short lines need no byte count at all.
  return line.length * 3 <= maxBytes || Buffer.byteLength(line, 'utf8') <= maxBytes;
}

/**
 * splitLine for text that is mostly ASCII (a code result's JSON: base64 images, HTML): ASCII
 * text is cut at exactly `maxBytes`, where splitLine's bound for any UTF-16 (3 bytes a unit)
 * would make three times as many pieces of a plot.
 */
export function splitText(text: string, maxBytes: number = Limits.eventLineMaxBytes): string[] {
  if (Buffer.byteLength(text, 'utf8') !== text.length) return splitLine(text, maxBytes);
  const pieces: string[] = [];
  for (let start = 0; start < text.length; start += maxBytes)
    pieces.push(text.slice(start, start + maxBytes));
  return pieces.length > 0 ? pieces : [''];
}
