import { describe, expect, it } from 'vitest';
import { AnswerHeadError, ChunkedScanner, parseAnswerHead } from './preview-answer-head.js';

const head = (text: string) => Buffer.from(text.replaceAll('\n', '\r\n'), 'latin1');

describe('parseAnswerHead', () => {
  it('keeps end-to-end headers (repeats as arrays), drops hop-by-hop ones and those Connection names', () => {
    const parsed = parseAnswerHead(
      head(
        'HTTP/1.1 200 OK\nContent-Type: text/html\nSet-Cookie: a=1\nset-cookie: b=2\nConnection: keep-alive, X-Hop\nKeep-Alive: timeout=5\nX-Hop: secret\nContent-Length: 12',
      ),
    );
    expect(parsed).toEqual({
      status: 200,
      headers: { 'content-type': 'text/html', 'set-cookie': ['a=1', 'b=2'], 'content-length': '12' },
      framing: { kind: 'length', length: 12 },
      keepAlive: true,
    });
  });

  it('reads the framing: chunked, none for 204 and 304, close without either, HTTP/1.0 not kept', () => {
    expect(parseAnswerHead(head('HTTP/1.1 200 OK\nTransfer-Encoding: chunked')).framing).toEqual({
      kind: 'chunked',
    });
    expect(parseAnswerHead(head('HTTP/1.1 304 Not Modified\nContent-Length: 5')).framing).toEqual({
      kind: 'none',
    });
    expect(parseAnswerHead(head('HTTP/1.1 204 No Content')).framing).toEqual({ kind: 'none' });
    const close = parseAnswerHead(head('HTTP/1.1 200 OK\nContent-Type: text/plain'));
    expect(close.framing).toEqual({ kind: 'close' });
    expect(close.keepAlive).toBe(false);
    expect(parseAnswerHead(head('HTTP/1.0 200 OK\nContent-Length: 1')).keepAlive).toBe(false);
    expect(parseAnswerHead(head('HTTP/1.1 200 OK\nConnection: close\nContent-Length: 1')).keepAlive).toBe(
      false,
    );
    // Both: chunked wins, the length goes, and the connection is not used again.
    const both = parseAnswerHead(head('HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nContent-Length: 3'));
    expect(both.headers['content-length']).toBeUndefined();
    expect(both.keepAlive).toBe(false);
  });

  it('refuses what a careful parser refuses, saying what', () => {
    const refused = (text: string) => () => parseAnswerHead(head(text));
    expect(refused('HTTP/2 200 OK')).toThrow(/status line is not HTTP\/1.x/);
    expect(refused('HTTP/1.1 200 OK\nbad header')).toThrow(/header line 1 is not name: value/);
    expect(refused('HTTP/1.1 200 OK\n folded: value')).toThrow(AnswerHeadError);
    expect(refused('HTTP/1.1 200 OK\nX-A: a\u0000b')).toThrow(/header X-A holds a control character/);
    expect(refused('HTTP/1.1 200 OK\nContent-Length: 1\nContent-Length: 2')).toThrow(
      /not one decimal length/,
    );
    expect(refused('HTTP/1.1 200 OK\nContent-Length: -1')).toThrow(/not one decimal length/);
    expect(refused('HTTP/1.1 200 OK\nTransfer-Encoding: gzip')).toThrow(
      /transfer-encoding gzip is not supported/,
    );
  });
});

describe('ChunkedScanner', () => {
  const body = Buffer.from(
    '5;ext=1\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: t\r\n\r\n',
    'latin1',
  );
  const relayed = '5;ext=1\r\nhello\r\n10\r\n0123456789abcdef\r\n';

  it('relays everything before the last chunk, whole size lines only, wherever the socket cuts', () => {
    for (let a = 0; a <= body.length; a++)
      for (let b = a; b <= body.length; b++) {
        const scanner = new ChunkedScanner();
        const out: Buffer[] = [];
        for (const piece of [body.subarray(0, a), body.subarray(a, b), body.subarray(b)]) {
          if (scanner.done) break;
          const { relay, extra } = scanner.push(piece);
          expect(extra).toBe(0);
          // A relayed piece never ends inside a size line: the client's last chunk follows cleanly.
          out.push(relay);
        }
        expect(scanner.done, `cut at ${a} and ${b}`).toBe(true);
        expect(Buffer.concat(out).toString('latin1'), `cut at ${a} and ${b}`).toBe(relayed);
      }
  });

  it('counts bytes past the body, and refuses malformed framing', () => {
    const scanner = new ChunkedScanner();
    expect(scanner.push(Buffer.from('1\r\na\r\n0\r\n\r\nEXTRA')).extra).toBe(5);
    expect(() => new ChunkedScanner().push(Buffer.from('zz\r\n'))).toThrow(/chunk size line is malformed/);
    expect(() => new ChunkedScanner().push(Buffer.from('1\r\nab\r\n'))).toThrow(/not followed by CRLF/);
    expect(() => new ChunkedScanner().push(Buffer.from('1234567890abc\r\n'))).toThrow(/over 12 hex digits/);
  });
});
