/**
 * The pickle reader builds plain values only (engine/snapshot/pickle.ts): every opcode that imports a Python object
 * or builds one (calls a callable, sets state, looks up a persistent id, an extension code or an out-of-band buffer)
 * is refused by name at its byte, with the arguments it would need already on the stack; and every opcode byte that is
 * not one of the plain-value opcodes is refused, so a new or unknown opcode never slips through.
 */
import { describe, expect, it } from 'vitest';
import { PickleError, readPickle } from '../../../engine/snapshot/pickle.ts';

const PROTO_5 = [0x80, 0x05];
const STOP = 0x2e;
const ascii = (text: string) => [...new TextEncoder().encode(text)];
/** On the stack before the opcode: a mark, a module and a name (for STACK_GLOBAL), an empty tuple, an empty dict. */
const ARGUMENTS = [0x28, 0x8c, 2, ...ascii('os'), 0x8c, 6, ...ascii('system'), 0x29, 0x7d];

/** Each opcode that would import or build a Python object, with the bytes that follow it in a pickle. */
const OBJECT_BUILDERS: [name: string, op: number, operand: number[]][] = [
  ['GLOBAL', 0x63, ascii('os\nsystem\n')],
  ['INST', 0x69, ascii('os\nsystem\n')],
  ['STACK_GLOBAL', 0x93, []],
  ['REDUCE', 0x52, []],
  ['BUILD', 0x62, []],
  ['OBJ', 0x6f, []],
  ['NEWOBJ', 0x81, []],
  ['NEWOBJ_EX', 0x92, []],
  ['PERSID', 0x50, ascii('1\n')],
  ['BINPERSID', 0x51, []],
  ['EXT1', 0x82, [1]],
  ['EXT2', 0x83, [1, 0]],
  ['EXT4', 0x84, [1, 0, 0, 0]],
  ['NEXT_BUFFER', 0x97, []],
  ['READONLY_BUFFER', 0x98, []],
];

/** The opcodes of plain values (protocols 2 to 5) the reader reads: everything else must be refused. */
const PLAIN = new Set([
  0x28, 0x2e, 0x30, 0x31, 0x32, // MARK STOP POP POP_MARK DUP
  0x4a, 0x4b, 0x4d, 0x4e, 0x47, 0x8a, 0x8b, 0x88, 0x89, // BININT BININT1 BININT2 NONE BINFLOAT LONG1 LONG4 NEWTRUE NEWFALSE
  0x58, 0x8c, 0x8d, 0x42, 0x43, 0x8e, 0x96, // BINUNICODE SHORT_BINUNICODE BINUNICODE8 BINBYTES SHORT_BINBYTES BINBYTES8 BYTEARRAY8
  0x5d, 0x6c, 0x61, 0x65, // EMPTY_LIST LIST APPEND APPENDS
  0x7d, 0x64, 0x73, 0x75, // EMPTY_DICT DICT SETITEM SETITEMS
  0x29, 0x74, 0x85, 0x86, 0x87, // EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3
  0x8f, 0x90, 0x91, // EMPTY_SET ADDITEMS FROZENSET
  0x68, 0x6a, 0x71, 0x72, 0x94, // BINGET LONG_BINGET BINPUT LONG_BINPUT MEMOIZE
  0x80, 0x95, // PROTO FRAME
]);

function refusal(bytes: number[]): PickleError {
  try {
    readPickle(Uint8Array.from(bytes));
  } catch (error) {
    expect(error).toBeInstanceOf(PickleError);
    return error as PickleError;
  }
  throw new Error('the pickle was read: it should have been refused');
}

describe('the pickle reader never builds an object', () => {
  it.each(OBJECT_BUILDERS)('refuses %s at its byte, by name', (name, op, operand) => {
    const at = PROTO_5.length + ARGUMENTS.length;
    const e = refusal([...PROTO_5, ...ARGUMENTS, op, ...operand, STOP]);
    expect(e.offset).toBe(at);
    expect(e.message).toContain(`byte ${at}`);
    expect(e.message).toMatch(new RegExp(`\\b${name} \\(0x${op.toString(16).padStart(2, '0')}\\)`));
    expect(e.message).toMatch(/would import the Python object|builds a Python object/);
  });

  it('refuses every opcode byte that is not a plain-value opcode', () => {
    let refused = 0;
    for (let op = 0; op < 256; op++) {
      if (PLAIN.has(op)) continue;
      const at = PROTO_5.length + ARGUMENTS.length;
      const e = refusal([...PROTO_5, ...ARGUMENTS, op, ...ascii('os\nsystem\n'), 0, 0, 0, 0, 0, 0, 0, 0, STOP]);
      expect(e.offset, `opcode 0x${op.toString(16)}`).toBe(at);
      refused++;
    }
    console.log(`pickle reader: ${refused} opcode bytes refused (of 256; ${PLAIN.size} plain-value opcodes read), ${OBJECT_BUILDERS.length} object builders refused by name`);
    expect(refused).toBe(256 - PLAIN.size);
    for (const [, op] of OBJECT_BUILDERS) expect(PLAIN.has(op)).toBe(false);
  });
});
