// node --test
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { callTool, count, listTools } from './words.js';

test('counts lines, words, characters and bytes', () => {
  assert.deepEqual(count(''), { lines: 0, words: 0, characters: 0, bytes: 0 });
  assert.deepEqual(count('one two\nthree\n'), { lines: 2, words: 3, characters: 14, bytes: 14 });
  assert.deepEqual(count('né 😀'), { lines: 1, words: 2, characters: 4, bytes: 8 });
});

test('the tool answers JSON and names a bad argument', () => {
  assert.equal(listTools()[0].name, '__NAME___words');
  assert.equal(callTool('__NAME___words', '{"text":"a b"}'), '{"lines":1,"words":2,"characters":3,"bytes":3}');
  assert.throws(() => callTool('__NAME___words', '{"text":1}'), { kind: 'invalid-input', message: 'text: expected a string' });
});
