import { useEffect, useState, type FormEvent } from 'react';
import type { StatusPayload } from '../../../../swarm/common/api.ts';
import { CopyableValue } from '../../components/CopyButton.tsx';
import { Fact, Facts, Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { createSwarm, joinSwarm, leaveSwarm, loadMembership } from '../../store/swarm/loaders.ts';
import { swarmSelectors } from '../../store/swarm/selectors.ts';
import { apiRequest } from '../../api/page-client.ts';

/** The swarm name the create form suggests (the CLI's default). */
const SUGGESTED_SWARM_NAME = 'lab';

/**
 * This peer on the swarm network: its peer id, swarm and connections, and the way in or out — create a swarm
 * (then show its join token to copy), join one by pasting a token, or leave. p2p starts and stops at once.
 */
export function SwarmNetworkPanel({ status }: { status: StatusPayload }) {
  const p2p = swarmSelectors.p2pSummary(status.p2p);
  const membership = useAppStore((s) => s.swarm.membership);
  // The status (pushed every second) says when p2p changed elsewhere, e.g. the CLI: reload the membership then.
  useEffect(() => void loadMembership(appStore, apiRequest()), [status.p2p.enabled, status.p2p.swarm]);

  return (
    <Panel title="Swarm network" aside={<span className="pill" data-state={p2p.state}>{p2p.label}</span>} testId="p2p-panel">
      <Facts>
        <Fact label="Peer ID">{status.p2p.peerId ? <CopyableValue value={status.p2p.peerId} label="peer ID" /> : <span className="muted">—</span>}</Fact>
        <Fact label="Private swarm" testId="swarm-name">
          {status.p2p.swarm ?? <span className="muted">None joined</span>}
        </Fact>
        <Fact label="Connected peers">{status.p2p.enabled ? formatCount(status.p2p.peers) : <span className="muted">—</span>}</Fact>
        {membership?.joined && membership.token && (
          <Fact label="Join token">
            <CopyableValue value={membership.token} label="join token" testId="swarm-token" />
          </Fact>
        )}
      </Facts>
      {membership?.joined ? (
        <>
          <p className="hint">Give the join token to the other lab machines: it lets them in, so share it like a password.</p>
          <LeaveButton swarm={membership.swarm ?? ''} />
        </>
      ) : membership?.disabled ? (
        <p className="hint">This peer was started with <code>--no-p2p</code>; restart it without that flag to join a swarm.</p>
      ) : (
        <MembershipForms />
      )}
      <MembershipError />
    </Panel>
  );
}

function MembershipForms() {
  const pending = useAppStore((s) => s.swarm.membershipPending);
  const [name, setName] = useState(SUGGESTED_SWARM_NAME);
  const [token, setToken] = useState('');
  const busy = pending !== null && pending !== 'load';

  function create(event: FormEvent) {
    event.preventDefault();
    void createSwarm(appStore, apiRequest(), { name: name.trim() || undefined });
  }

  function join(event: FormEvent) {
    event.preventDefault();
    void joinSwarm(appStore, apiRequest(), token.trim());
  }

  return (
    <div className="membership-forms">
      <form className="membership-form" onSubmit={create} aria-label="Create a swarm">
        <label className="field">
          <span className="field__label">New swarm name</span>
          <input className="input" value={name} onChange={(e) => setName(e.target.value)} maxLength={64} required disabled={busy} />
        </label>
        <button type="submit" className="button button--primary" disabled={busy}>
          {pending === 'create' ? 'Creating…' : 'Create swarm'}
        </button>
      </form>
      <form className="membership-form" onSubmit={join} aria-label="Join a swarm">
        <label className="field membership-form__token">
          <span className="field__label">Join token from another peer</span>
          <input
            className="input mono"
            value={token}
            onChange={(e) => setToken(e.target.value)}
            placeholder="ajs1.…"
            spellCheck={false}
            autoComplete="off"
            required
            disabled={busy}
          />
        </label>
        <button type="submit" className="button" disabled={busy || token.trim() === ''}>
          {pending === 'join' ? 'Joining…' : 'Join swarm'}
        </button>
      </form>
    </div>
  );
}

function LeaveButton({ swarm }: { swarm: string }) {
  const pending = useAppStore((s) => s.swarm.membershipPending);
  const [confirming, setConfirming] = useState(false);
  if (!confirming)
    return (
      <button type="button" className="button" onClick={() => setConfirming(true)} disabled={pending === 'leave'}>
        Leave swarm
      </button>
    );
  return (
    <div className="toolbar" role="group" aria-label="Confirm leaving">
      <span>
        Leave <strong>{swarm}</strong>? This peer stops sharing models and episodes and forgets the token.
      </span>
      <button
        type="button"
        className="button button--danger"
        onClick={() => {
          setConfirming(false);
          void leaveSwarm(appStore, apiRequest());
        }}
      >
        Leave
      </button>
      <button type="button" className="button" onClick={() => setConfirming(false)}>
        Cancel
      </button>
    </div>
  );
}

function MembershipError() {
  const error = useAppStore((s) => s.swarm.membershipError);
  if (!error) return null;
  return (
    <p className="alert" role="alert" data-testid="swarm-error" data-error-name={error.name}>
      {membershipErrorText(error)}
    </p>
  );
}

/** The server's message is precise; a few errors get a plainer first sentence. */
function membershipErrorText(error: { name: string; message: string }): string {
  if (error.name === 'InvalidSwarmTokenError') return `That is not a valid join token (${error.message}). Copy the whole token from the other peer.`;
  return `${error.name}: ${error.message}`;
}
