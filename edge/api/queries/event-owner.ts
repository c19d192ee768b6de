// Whose events a query reads: one workspace's, or the installation rows (NULL
// workspace) that only an instance admin may reach. Each query picks the
// bound SQL function for it; no query takes a NULL workspace to mean "any".
export type EventOwner = { workspaceId: string } | { installation: true };

export function isInstallation(owner: EventOwner): owner is { installation: true } {
  return 'installation' in owner;
}
