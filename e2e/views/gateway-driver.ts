/**
 * Produces episodes the way an agent does, through the peer's real endpoints: begin an episode on the swarm
 * protocol (control token), talk to the OpenAI-compatible gateway with the episode's key for a few turns
 * (each turn sends the whole history back, plus a tool result), then end it with a reward.
 */
export interface GatewayPeer {
  /** `http://127.0.0.1:PORT` */
  origin: string;
  token: string;
}

export interface AgentRunOptions {
  model: string;
  taskId: string;
  turns: number;
  reward: number;
  /** Tokens per answer: small keeps the tiny model fast. */
  maxTokens?: number;
}

interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_call_id?: string;
}

async function post<T>(url: string, key: string, body: unknown): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${url}: HTTP ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

/** One agent run; returns the episode id. */
export async function runAgentEpisode(peer: GatewayPeer, options: AgentRunOptions): Promise<string> {
  const begun = await post<{ episodeId: string; baseUrl: string; apiKey: string }>(
    `${peer.origin}/swarm/v1/episodes`,
    peer.token,
    {
      model: options.model,
      taskId: options.taskId,
      kind: 'train',
    },
  );
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You are a calculator agent. Use the tool results to answer.' },
    { role: 'user', content: `Task ${options.taskId}: add the numbers you are given.` },
  ];
  for (let turn = 0; turn < options.turns; turn++) {
    const completion = await post<{ choices: { message: ChatMessage }[] }>(
      `${begun.baseUrl}/chat/completions`,
      begun.apiKey,
      {
        model: options.model,
        messages,
        max_tokens: options.maxTokens ?? 6,
        temperature: 1,
      },
    );
    messages.push({ role: 'assistant', content: completion.choices[0].message.content ?? '' });
    messages.push({ role: 'user', content: `tool result ${turn}: ${turn * 7 + 3}` });
  }
  await post(`${peer.origin}/swarm/v1/episodes/${begun.episodeId}/end`, peer.token, {
    reward: options.reward,
    success: options.reward > 0,
  });
  return begun.episodeId;
}
