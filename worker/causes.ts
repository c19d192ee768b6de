// Walks an error's cause chain: `cause` links and AggregateError.errors,
// depth first, each error once.

const maxCauses = 32;

export function causeChain(error: unknown): unknown[] {
  const seen = new Set<unknown>();
  const chain: unknown[] = [];
  const visit = (value: unknown): void => {
    if (value === undefined || value === null || seen.has(value) || chain.length >= maxCauses) return;
    seen.add(value);
    chain.push(value);
    if (typeof value !== 'object') return;
    if (value instanceof AggregateError) for (const inner of value.errors) visit(inner);
    visit((value as { cause?: unknown }).cause);
  };
  visit(error);
  return chain;
}

/** The class name of one error: its `name`, else its constructor's name. */
export function errorClassName(error: unknown): string {
  if (error instanceof Error) return error.name || error.constructor.name || 'Error';
  if (typeof error === 'object' && error !== null) return error.constructor?.name || 'Object';
  return typeof error;
}
