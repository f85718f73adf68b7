/** One episode: its facts, and the conversation as each agent saw it (messages, tool calls, tool results). */
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { showView } from './navigation.ts';
import { episodesSelectors, type ChatMessage } from '../../store/episodes/selectors.ts';
import { loadTimeline } from '../../store/timeline/loaders.ts';
import { apiRequest } from '../../api/page-client.ts';
import type { EpisodeDetail as EpisodeDetailPayload } from '../../store/episodes/types.ts';
import { formatEpisodeTime, formatReward, shortHash } from './format.ts';

export function EpisodeDetail() {
  const selectedId = useAppStore((s) => s.episodes.selectedId);
  const detail = useAppStore((s) => s.episodes.detail);
  const error = useAppStore((s) => s.episodes.detailError);
  if (!selectedId) {
    return (
      <Panel title="Episode">
        <p className="muted">Choose an episode to read its conversation. ↑/↓ in the list, Enter to open.</p>
      </Panel>
    );
  }
  if (error) {
    return (
      <Panel title="Episode">
        <p className="alert" role="alert">
          {error}
        </p>
      </Panel>
    );
  }
  if (!detail) {
    return (
      <Panel title="Episode">
        <p className="muted" aria-busy="true">
          Loading {selectedId}…
        </p>
      </Panel>
    );
  }
  const { episode, calls } = detail;
  return (
    <Panel
      title="Episode"
      testId="episode-detail"
      aside={
        <button
          type="button"
          className="button button--primary button--small"
          onClick={() => {
            loadTimeline(appStore, apiRequest(), episode.id);
            showView('timeline');
          }}
        >
          Merge view
        </button>
      }
    >
      <dl className="facts">
        <Fact label="Id">
          <code data-testid="episode-detail-id">{episode.id}</code>
        </Fact>
        <Fact label="Model">
          {episode.model} <span className="muted">(policy v{episode.policyVersion})</span>
        </Fact>
        <Fact label="Task">
          {episode.taskId} <span className="muted">· {episode.kind}</span>
        </Fact>
        <Fact label="Outcome">
          <span className="state-tag" data-state={episode.state}>
            {episode.state}
          </span>{' '}
          reward <span className="mono">{formatReward(episode.reward)}</span>
          {episode.success !== null && (
            <span className="muted"> · {episode.success ? 'success' : 'no success'}</span>
          )}
          {episode.abortReason && <div className="small error-text">{episode.abortReason}</div>}
        </Fact>
        <Fact label="Script">
          {episode.client ?? '—'} <span className="mono muted">{shortHash(episode.scriptHash)}</span>
          {episode.teamId && <div className="small muted">team {episode.teamId}</div>}
        </Fact>
        <Fact label="Time">
          {formatEpisodeTime(episode.createdAt)}
          {episode.endedAt && <span className="muted"> → {formatEpisodeTime(episode.endedAt)}</span>}
        </Fact>
        <Fact label="Calls">
          {formatCount(calls.length)}
          {episode.cancelledCalls ? (
            <span className="muted"> · {formatCount(episode.cancelledCalls)} cancelled (the client hung up)</span>
          ) : null}
        </Fact>
      </dl>
      <EpisodeConversations calls={calls} />
    </Panel>
  );
}

/** What each agent of an episode said and was answered (also one side of "Compare versions"). */
export function EpisodeConversations({ calls }: { calls: EpisodeDetailPayload['calls'] }) {
  const conversations = episodesSelectors.conversations(calls);
  if (conversations.length === 0) return <p className="muted">No LLM call was recorded for this episode.</p>;
  return (
    <>
      {conversations.map((conversation, i) => (
        <section key={conversation.agentKey} className="conversation" aria-label={`Conversation ${i + 1}`}>
          {conversations.length > 1 && (
            <h3 className="conversation__title">
              Agent {i + 1} <span className="mono muted small">{shortHash(conversation.agentKey)}</span> ·{' '}
              {conversation.calls} calls
            </h3>
          )}
          <ol className="messages" data-testid="conversation">
            {conversation.messages.map((message, index) => (
              <Message key={index} message={message} />
            ))}
          </ol>
        </section>
      ))}
    </>
  );
}

export function Fact({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div className="facts__row">
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

function Message({ message }: { message: ChatMessage }) {
  return (
    <li className="message" data-role={message.role}>
      <div className="message__role">
        {message.role}
        {message.name && <span className="muted"> · {message.name}</span>}
        {message.tool_call_id && (
          <span className="mono muted small"> · result of {message.tool_call_id}</span>
        )}
      </div>
      {message.reasoning_content && <pre className="message__reasoning">{message.reasoning_content}</pre>}
      {message.content && <pre className="message__content">{message.content}</pre>}
      {message.tool_calls?.map((call) => (
        <div key={call.id} className="tool-call">
          <span className="tool-call__name mono">{call.function.name}</span>
          <span className="mono muted small"> {call.id}</span>
          <pre className="tool-call__args">{prettyArguments(call.function.arguments)}</pre>
        </div>
      ))}
    </li>
  );
}

/** Tool-call arguments indented when they are JSON; shown as sent otherwise. */
export function prettyArguments(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
