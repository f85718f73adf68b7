/**
 * Joining and leaving a swarm from the UI (behind the control token):
 *   GET  /api/swarm                       whether this peer is in a swarm, its name, join token, peer id, addresses
 *   POST /api/swarm/create {name?, bootstrap?}   a new private swarm: its token is stored and p2p starts now
 *   POST /api/swarm/join {token}          joins with another peer's token (400 InvalidSwarmTokenError, nothing changed)
 *   POST /api/swarm/leave                 stops p2p and forgets the stored token
 * Each answers the membership after the change (SwarmMembership); 409 AlreadyInSwarmError / NotInSwarmError /
 * P2pDisabledError when the change does not apply.
 */
import { createSwarmRequestSchema, joinSwarmRequestSchema, type SwarmMembership } from '../../common/api.ts';
import { readValidated, sendJson } from '../http/respond.ts';
import type { Router } from '../http/router.ts';

/** What the routes ask of the membership (swarm-membership.ts). */
export interface MembershipActions {
  view(): SwarmMembership;
  create(request: { name?: string; bootstrap?: string[] }): Promise<SwarmMembership>;
  join(token: string): Promise<SwarmMembership>;
  leave(): Promise<SwarmMembership>;
}

/** Swarm requests are a name or a token: small. */
const SWARM_BODY_LIMIT = 64 * 1024;

export function addSwarmRoutes(control: Router, membership: MembershipActions): void {
  control.get('/api/swarm', (_req, res) => sendJson(res, 200, membership.view()));
  control.post('/api/swarm/create', async (req, res) => {
    const request = await readValidated(req, createSwarmRequestSchema, SWARM_BODY_LIMIT);
    sendJson(res, 200, await membership.create(request));
  });
  control.post('/api/swarm/join', async (req, res) => {
    const { token } = await readValidated(req, joinSwarmRequestSchema, SWARM_BODY_LIMIT);
    sendJson(res, 200, await membership.join(token));
  });
  control.post('/api/swarm/leave', async (_req, res) => sendJson(res, 200, await membership.leave()));
}
