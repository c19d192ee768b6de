// docs/configuration.md, rendered from the places the code reads its
// configuration: the environment variables of db/environment.ts, the options
// of the `wharf` command as commander holds them, and the vars wrangler.toml
// gives the Worker. `npm run docs:config` writes it; a test renders it again
// and fails when the committed file differs.
import type { Command, Option } from 'commander';
import { environment, readers, type Declaration, type Reader } from '../db/environment.js';

/** `NAME = "value"` lines of wrangler.toml's [vars] tables, by table. */
export function wranglerVars(toml: string): Map<string, Map<string, string>> {
  const tables = new Map<string, Map<string, string>>();
  let current: Map<string, string> | undefined;
  for (const line of toml.split('\n')) {
    const table = /^\s*\[([^\]]+)\]\s*(#.*)?$/.exec(line);
    if (table) {
      const name = table[1]!.trim();
      current = name === 'vars' || name.endsWith('.vars') ? new Map() : undefined;
      if (current) tables.set(name, current);
      continue;
    }
    const entry = /^\s*([A-Z][A-Z0-9_]*)\s*=\s*"([^"]*)"\s*(#.*)?$/.exec(line);
    if (current && entry) current.set(entry[1]!, entry[2]!);
  }
  return tables;
}

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const code = (text: string): string => `\`${text}\``;

function duration(ms: number): string {
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1_000]] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

function mebibytes(bytes: number): string {
  const value = bytes / (1024 * 1024);
  return Number.isInteger(value) ? `${value} MiB` : `${value.toFixed(1)} MiB`;
}

/** A variable's default as the reference shows it. */
export function shownDefault(declaration: Declaration): string {
  const value = declaration.default;
  if (value === undefined) return declaration.defaultText ?? '—';
  switch (declaration.kind) {
    case 'bytes': return `${code(String(value))} (${mebibytes(Number(value))})`;
    case 'seconds': return `${code(String(value))} (seconds)`;
    case 'milliseconds': return `${code(String(value))} (ms)`;
    case 'duration': return code(duration(Number(value)));
    default: return code(String(value));
  }
}

function variablesSection(): string[] {
  const lines = [
    '## Environment variables',
    '',
    '`<APP>` is an app\'s name as in its route (`/hooks/github/<app>`), upper-cased, every character outside',
    '`A-Z0-9` written `_`. **Secret**: give it through the platform\'s secrets (`wrangler secret put`, the',
    'service manager), never in a file under version control, never in a log.',
    '',
    '| variable | default | read by | meaning |',
    '|---|---|---|---|',
  ];
  for (const [name, declaration] of Object.entries(environment) as [string, Declaration][]) {
    const meaning = `${declaration.kind === 'secret' ? '**Secret.** ' : ''}${declaration.description}`;
    lines.push(`| ${code(name)} | ${cell(shownDefault(declaration))} | ${declaration.readBy.join(', ')} | ${cell(meaning)} |`);
  }
  lines.push('', 'Readers:', '');
  for (const [reader, what] of Object.entries(readers) as [Reader, string][]) {
    const names = Object.entries(environment as Record<string, Declaration>)
      .filter(([, declaration]) => declaration.readBy.includes(reader)).map(([name]) => code(name));
    lines.push(`- **${reader}**: ${what}. ${names.join(', ')}.`);
  }
  return lines;
}

function wranglerSection(toml: string): string[] {
  const tables = wranglerVars(toml);
  const names = [...new Set([...tables.values()].flatMap((vars) => [...vars.keys()]))];
  const tableNames = [...tables.keys()];
  const heading = (table: string) => (table === 'vars' ? '`[vars]` (Neon)' : `\`[${table}]\``);
  return [
    '## The Worker\'s vars in `wrangler.toml`',
    '',
    'The vars `wrangler.toml` gives the Worker, by environment (`wrangler dev --env hyperdrive`). An',
    'environment inherits no vars: each repeats them. Secrets are never here (`wrangler secret put`).',
    '',
    `| variable | ${tableNames.map(heading).join(' | ')} |`,
    `|---|${tableNames.map(() => '---').join('|')}|`,
    ...names.map((name) => `| ${code(name)} | ${tableNames.map((table) => {
      const value = tables.get(table)!.get(name);
      return value === undefined ? '—' : code(value);
    }).join(' | ')} |`),
  ];
}

/** Every command below `command`, depth first, `help` left out. */
export function commandsOf(command: Command): Command[] {
  return command.commands.filter((sub) => sub.name() !== 'help').flatMap((sub) => [sub, ...commandsOf(sub)]);
}

function fullName(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at; at = at.parent) names.unshift(at.name());
  return names.join(' ');
}

function optionDefault(option: Option): string {
  // A --no-x option's default (true) is the positive option's, not news.
  if (option.negate || option.defaultValue === undefined || option.defaultValue === false) return '—';
  if (Array.isArray(option.defaultValue)) return option.defaultValue.length === 0 ? '—' : code(option.defaultValue.join(','));
  return code(String(option.defaultValue));
}

function commandSection(command: Command): string[] {
  const lines = [`### \`${fullName(command)}\``, '', command.description(), ''];
  const usage = `${fullName(command)} ${command.usage()}`.trim();
  lines.push(`Usage: ${code(usage)}`, '');
  const args = command.registeredArguments;
  if (args.length > 0) {
    lines.push(...args.map((arg) => `- ${code(arg.required ? `<${arg.name()}>` : `[${arg.name()}]`)}: ${arg.description || arg.name()}`), '');
  }
  const options = command.options.filter((option) => !option.hidden);
  if (options.length > 0) {
    lines.push('| option | default | environment | meaning |', '|---|---|---|---|');
    for (const option of options) {
      const meaning = `${option.mandatory ? '**Required.** ' : ''}${option.description}`;
      lines.push(`| ${code(option.flags)} | ${optionDefault(option)} | ${option.envVar ? code(option.envVar) : '—'} | ${cell(meaning)} |`);
    }
    lines.push('');
  }
  return lines;
}

function cliSection(program: Command): string[] {
  const commands = commandsOf(program);
  return [
    '## The `wharf` command',
    '',
    '`npx wharf-inbox <command>` (`wharf` inside an application that installed the package). An option',
    'given on the command line wins over its environment variable. Durations are written `500ms`, `10s`,',
    '`5m`, `1h` or as milliseconds. Every command answers `--help`.',
    '',
    ...commands.filter((command) => command.commands.length > 0).map((command) =>
      `- ${code(fullName(command))}: ${commandsOf(command).map((sub) => code(sub.name())).join(', ')}`),
    '',
    ...commands.filter((command) => command.commands.length === 0).flatMap(commandSection),
  ];
}

export function renderConfigurationReference(inputs: { program: Command; wranglerToml: string }): string {
  const lines = [
    '<!-- Generated by `npm run docs:config` from db/environment.ts, the options of the `wharf` command',
    '     (cli/program.ts) and wrangler.toml: edit those, then run it. test/docs/configuration.test.ts',
    '     fails when this file and the code disagree. -->',
    '# Configuration reference',
    '',
    'Every environment variable Wharf reads and every option of the `wharf` command, with its default.',
    'The policy that changes without a deploy (lease, retries, retention) lives in PostgreSQL, in',
    '`wharf.setting`: see [Policy settings](operating.md#policy-settings).',
    '',
    ...variablesSection(),
    '',
    ...wranglerSection(inputs.wranglerToml),
    '',
    ...cliSection(inputs.program),
  ];
  return `${lines.join('\n').replace(/\n{3,}/g, '\n\n').trimEnd()}\n`;
}
