// Reading a count or a bound from configuration (an environment variable, an
// option): the one rule every part applies.

/** `value` as a positive safe integer ("25", 25), else undefined (0, -3, 2.5, "1e3x", ''). */
export function parsePositiveInteger(value: unknown): number | undefined {
  const number = typeof value === 'string' && value.trim() !== '' ? Number(value) : typeof value === 'number' ? value : NaN;
  return Number.isSafeInteger(number) && number > 0 ? number : undefined;
}
