// Parsers for command-line option values, shared by every verb.
import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../duration.js';

export function positiveInteger(value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1) throw new InvalidArgumentError(`expected a positive integer, not ${JSON.stringify(value)}`);
  return number;
}

export function port(value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0 || number > 65_535) throw new InvalidArgumentError(`not a port: ${JSON.stringify(value)}`);
  return number;
}

export function duration(value: string): number {
  try {
    return parseDuration(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}
