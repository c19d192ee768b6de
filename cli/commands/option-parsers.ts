// Parsers for command-line option values, shared by every verb.
import { InvalidArgumentError, Option } from 'commander';
import { parsePositiveInteger } from '../../db/numbers.js';
import { formatDuration, parseDuration } from '../duration.js';

export function positiveInteger(value: string): number {
  const number = parsePositiveInteger(value);
  if (number === undefined) throw new InvalidArgumentError(`expected a positive integer, not ${JSON.stringify(value)}`);
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

/** An http(s) base URL people open, without a query or fragment (links are built under it). */
export function baseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`not a URL: ${JSON.stringify(value)}`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new InvalidArgumentError(`expected an http(s) URL without query, fragment or credentials, not ${JSON.stringify(value)}`);
  }
  return value.replace(/\/+$/, '');
}

/** An option whose value is a duration (cli/duration.ts), its default shown as one. */
export function durationOption(flags: string, description: string, defaultMs?: number): Option {
  const option = new Option(flags, description).argParser(duration);
  return defaultMs === undefined ? option : option.default(defaultMs, formatDuration(defaultMs));
}
