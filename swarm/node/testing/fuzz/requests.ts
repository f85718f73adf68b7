/**
 * Fuzzed HTTP requests for a real peer, as fast-check arbitraries: the gateway (chat completions), the swarm
 * protocol (episodes begin/end/abort, status), every control-API route (found by grepping the routers), and raw
 * request lines and headers no HTTP client would send. A request is data with placeholders (`{port}`, `{token}`,
 * `{ep}`, `{key}`: the peer's port and token, and an episode of the batch's pool) filled in at send time, so one
 * seed gives the same requests against any peer.
 */
import fc from 'fast-check';
import { jsonBody, unicodeString } from './json.ts';

export type Family = 'gateway' | 'swarm' | 'control' | 'raw';
export const FAMILIES: readonly Family[] = ['gateway', 'swarm', 'control', 'raw'];

export type Auth = 'control' | 'episode-key' | 'none' | 'wrong' | 'malformed';

export interface FuzzRequest {
  family: Family;
  /** What was done to the body (valid, mutated, damaged-text …) or which raw variant. */
  variant: string;
  method: string;
  /** The request target as sent (placeholders filled in at send time). */
  target: string;
  /** Index into the batch's episode pool, for `{ep}` and `{key}`. */
  episode: number;
  auth: Auth;
  contentType: string | null;
  body: Buffer | null;
  /** A whole request written out (raw family): sent as it is, after the placeholders. */
  raw?: Buffer;
}

/** Generation is capped for speed, not correctness: a fuzzed call that is valid still generates, on 2 cores. */
export const FUZZ_MAX_TOKENS = 4;
/** Valid fuzzed calls ask for at most this many choices (MAX_N is 16): the same bound on generation time. */
const FUZZ_MAX_N = 2;
/** An accepted episode with a sub-minute idle timeout would abort itself mid-batch: a state change nobody sent. */
const MIN_FUZZ_IDLE_TIMEOUT_S = 3_600;
/** Attach bodies always name this script: a valid attach must never run fuzzed code. */
export const NONEXISTENT_SCRIPT = '/nonexistent-agentjet-fuzz/agent.mjs';
/** Past Node's 16 KiB header limit (431) but far from a memory test. */
const HUGE_HEADER_BYTES = 20_000;
/** Past the swarm protocol's 1 MiB body limit (413), sent in full. */
const HUGE_BODY_BYTES = 1_100_000;

// ---- bodies -------------------------------------------------------------------------------------------------

const text = fc.oneof({ arbitrary: fc.string({ maxLength: 40 }), weight: 4 }, { arbitrary: unicodeString, weight: 1 });
const content = fc.oneof(text, fc.array(fc.record({ type: fc.constant('text'), text }), { minLength: 1, maxLength: 2 }));
const toolName = fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/);
const message = fc.oneof(
  fc.record({ role: fc.constant('user'), content }),
  fc.record({ role: fc.constantFrom('system', 'developer'), content }),
  fc.record({ role: fc.constant('assistant'), content: fc.option(text, { nil: null }) }),
  fc.record({
    role: fc.constant('assistant'),
    content: fc.constant(null),
    tool_calls: fc.array(
      fc.record({ id: fc.stringMatching(/^call_[a-z0-9]{1,8}$/), type: fc.constant('function'), function: fc.record({ name: toolName, arguments: fc.json({ maxDepth: 2 }) }) }),
      { minLength: 1, maxLength: 2 },
    ),
  }),
  fc.record({ role: fc.constant('tool'), content: text, tool_call_id: fc.stringMatching(/^call_[a-z0-9]{1,8}$/) }),
);
const tool = fc.record({
  type: fc.constant('function'),
  function: fc.record(
    { name: toolName, description: text, parameters: fc.constant({ type: 'object', properties: { expr: { type: 'string' } } }) },
    { requiredKeys: ['name'] },
  ),
});

export const validChatBody = fc.record(
  {
    model: fc.constantFrom('tiny', 'tiny', 'gpt-4o-mini', ''),
    messages: fc.array(message, { minLength: 1, maxLength: 4 }),
    max_tokens: fc.integer({ min: 1, max: FUZZ_MAX_TOKENS }),
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    top_p: fc.double({ min: 0.01, max: 1, noNaN: true }),
    stream: fc.boolean(),
    stream_options: fc.record({ include_usage: fc.boolean() }),
    n: fc.integer({ min: 1, max: FUZZ_MAX_N }),
    seed: fc.integer(),
    stop: fc.oneof(fc.string({ minLength: 1, maxLength: 4 }), fc.array(fc.string({ minLength: 1, maxLength: 4 }), { maxLength: 4 })),
    logprobs: fc.boolean(),
    top_logprobs: fc.integer({ min: 0, max: 20 }),
    max_completion_tokens: fc.integer({ min: 1, max: FUZZ_MAX_TOKENS }),
    tools: fc.array(tool, { maxLength: 2 }),
    tool_choice: fc.oneof(fc.constantFrom('none', 'auto', 'required'), fc.record({ type: fc.constant('function'), function: fc.record({ name: toolName }) })),
  },
  { requiredKeys: ['model', 'messages', 'max_tokens'] },
);

const label = fc.oneof(fc.stringMatching(/^[a-z0-9-]{1,16}$/), text);
export const validBeginBody = fc.record(
  {
    model: fc.constantFrom('tiny', 'tiny', 'nope'),
    taskId: label,
    kind: fc.constantFrom('train', 'eval'),
    idleTimeoutS: fc.integer({ min: MIN_FUZZ_IDLE_TIMEOUT_S, max: 86_400 }),
    sampling: fc.record({ temperature: fc.double({ min: 0, max: 2, noNaN: true }), max_tokens: fc.integer({ min: 1, max: FUZZ_MAX_TOKENS }), seed: fc.integer() }, { requiredKeys: [] }),
    client: label,
    scriptHash: label,
    teamId: label,
    aliases: fc.array(fc.stringMatching(/^[a-z0-9.-]{1,12}$/), { maxLength: 3 }),
  },
  { requiredKeys: ['model', 'taskId'] },
);
export const validEndBody = fc.record(
  { reward: fc.double({ noNaN: true, noDefaultInfinity: true }), success: fc.boolean(), metrics: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }) },
  { requiredKeys: ['reward'] },
);
export const validAbortBody = fc.record({ reason: fc.string({ minLength: 1, maxLength: 60 }) });
const validRunConfigBody = fc.record({
  overrides: fc.record({ train: fc.record({ learningRate: fc.oneof(fc.constantFrom(1e-5, 3e-4), fc.double()) }), groupSize: fc.integer({ min: -2, max: 9 }) }, { requiredKeys: [] }),
});
const validTrainingBody = fc.record({ action: fc.constantFrom('pause', 'stop') });
const validAttachBody = fc.record(
  {
    name: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,12}$/),
    script: fc.constant({ path: NONEXISTENT_SCRIPT }),
    tasks: fc.oneof(fc.record({ inline: fc.array(fc.record({ id: fc.oneof(fc.string({ minLength: 1, maxLength: 6 }), fc.integer()) }), { minLength: 1, maxLength: 3 }) }), fc.constant({ path: '/nonexistent-agentjet-fuzz/tasks.jsonl' })),
    model: fc.constant('tiny'),
    repeat: fc.integer({ min: 1, max: 8 }),
    concurrency: fc.integer({ min: 1, max: 4 }),
  },
  { requiredKeys: ['name', 'script', 'tasks'] },
);
const validSwarmCreate = fc.record({ name: fc.stringMatching(/^[a-z0-9-]{1,12}$/) }, { requiredKeys: [] });
const validSwarmJoin = fc.record({ token: fc.oneof(fc.constant('ajs1.'), fc.string({ maxLength: 40 }).map((s) => `ajs1.${Buffer.from(s).toString('base64url')}`), text) });

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const positive = (v: unknown): v is number => typeof v === 'number' && v > 0;

/**
 * Keeps what a mutation may have made valid within the suite's bounds (each rule says why above): at most
 * FUZZ_MAX_TOKENS tokens and FUZZ_MAX_N choices, no short idle timeouts, never a training start (a background step
 * would change state under later requests), never a script or reward module that could run.
 */
function sanitize(value: unknown): unknown {
  if (!isObject(value)) return value;
  const v = { ...value };
  for (const key of ['max_tokens', 'max_completion_tokens'] as const) if (positive(v[key]) && v[key] > FUZZ_MAX_TOKENS) v[key] = FUZZ_MAX_TOKENS;
  if ('messages' in v && v.max_tokens == null && v.max_completion_tokens == null) v.max_tokens = FUZZ_MAX_TOKENS;
  if (positive(v.n) && v.n > FUZZ_MAX_N) v.n = FUZZ_MAX_N;
  if (positive(v.idleTimeoutS) && v.idleTimeoutS < MIN_FUZZ_IDLE_TIMEOUT_S) v.idleTimeoutS = MIN_FUZZ_IDLE_TIMEOUT_S;
  if (isObject(v.sampling) && positive(v.sampling.max_tokens) && v.sampling.max_tokens > FUZZ_MAX_TOKENS) v.sampling = { ...v.sampling, max_tokens: FUZZ_MAX_TOKENS };
  if (v.action === 'start') v.action = 'pause';
  if ('script' in v) v.script = { path: NONEXISTENT_SCRIPT };
  if ('rewardModule' in v) delete v.rewardModule;
  return v;
}

// ---- targets and headers --------------------------------------------------------------------------------------

/** A path segment: mostly the pool's episode, else an odd string encoded one of three ways. */
const segment = (known: string) =>
  fc.oneof(
    { arbitrary: fc.constant(known), weight: 4 },
    { arbitrary: unicodeString.map((s) => encodeURIComponent(s.replace(/[\uD800-\uDFFF]/g, '?'))), weight: 2 },
    { arbitrary: fc.constantFrom('%', '%zz', '%E0%A4%A', '%00', '%2F', '..', '%2e%2e', 'x'.repeat(2000), '%C0%AF', '%ED%A0%80'), weight: 2 },
  );
const modelSegment = segment('tiny');
const episodeSegment = segment('{ep}');
const clientSegment = segment('fuzz-client');
const runSegment = segment('tiny-1');

const queryValue = fc.oneof(
  fc.constantFrom('', '-1', '0', '1', '1e400', 'NaN', '2.5', '9007199254740993', 'train', 'eval', 'active', 'ended', '%zz', '%ff', 'tiny', '1&limit=2'),
  unicodeString.map((s) => encodeURIComponent(s.replace(/[\uD800-\uDFFF]/g, '?'))),
);
const query = (keys: string[]) =>
  fc.array(fc.tuple(fc.constantFrom(...keys, 'extra'), queryValue), { maxLength: 3 }).map((pairs) => (pairs.length === 0 ? '' : '?' + pairs.map(([k, v]) => `${k}=${v}`).join('&')));

const auth = (usual: Auth) =>
  fc.oneof({ arbitrary: fc.constant(usual), weight: 8 }, { arbitrary: fc.constantFrom<Auth>('control', 'episode-key', 'none', 'wrong', 'malformed'), weight: 2 });
const contentType = fc.oneof(
  { arbitrary: fc.constant('application/json'), weight: 12 },
  { arbitrary: fc.constantFrom(null, 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', 'application/vnd.api+json', 'APPLICATION/JSON ;', 'multipart/form-data; boundary=x', ''), weight: 2 },
);

const request = (family: Family, method: string, target: fc.Arbitrary<string>, usualAuth: Auth, body: fc.Arbitrary<unknown> | null) =>
  fc
    .record({
      target,
      episode: fc.nat(),
      auth: auth(usualAuth),
      contentType: body ? contentType : fc.constant(null),
      body: body ? jsonBody(body, sanitize) : fc.constant(null),
    })
    .map(
      (r): FuzzRequest => ({
        family,
        variant: r.body?.mutation ?? 'no-body',
        method,
        target: r.target,
        episode: r.episode,
        auth: r.auth,
        contentType: r.contentType,
        body: r.body?.body ?? null,
      }),
    );

// ---- the families ---------------------------------------------------------------------------------------------

export const gatewayRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  { arbitrary: request('gateway', 'POST', fc.constant('/v1/chat/completions'), 'episode-key', validChatBody), weight: 12 },
  { arbitrary: request('gateway', 'GET', fc.constantFrom('/v1/models', '/v1/chat/completions', '/v1/completions', '/v1'), 'episode-key', null), weight: 1 },
);

export const swarmRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  { arbitrary: request('swarm', 'POST', fc.constant('/swarm/v1/episodes'), 'control', validBeginBody), weight: 4 },
  { arbitrary: request('swarm', 'POST', episodeSegment.map((e) => `/swarm/v1/episodes/${e}/end`), 'control', validEndBody), weight: 4 },
  { arbitrary: request('swarm', 'POST', episodeSegment.map((e) => `/swarm/v1/episodes/${e}/abort`), 'control', validAbortBody), weight: 3 },
  { arbitrary: request('swarm', 'GET', fc.constantFrom('/swarm/v1/status', '/swarm/v1/episodes', '/swarm/v1'), 'control', null), weight: 1 },
  { arbitrary: request('swarm', 'POST', episodeSegment.map((e) => `/swarm/v1/episodes/${e}/restart`), 'control', validEndBody), weight: 1 },
);

/** Every control-API route (grep the routers: `.get('/api`, `.post('/api`, `.delete('/api`), with odd params and queries. */
export const controlRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  ...[
    request('control', 'GET', fc.constant('/api/status'), 'control', null),
    request('control', 'GET', fc.constant('/api/models'), 'control', null),
    request('control', 'GET', modelSegment.map((m) => `/api/models/${m}/training`), 'control', null),
    request('control', 'POST', modelSegment.map((m) => `/api/models/${m}/training`), 'control', validTrainingBody),
    request('control', 'GET', fc.tuple(modelSegment, query(['limit', 'after'])).map(([m, q]) => `/api/models/${m}/steps${q}`), 'control', null),
    request('control', 'GET', modelSegment.map((m) => `/api/models/${m}/checkpoints`), 'control', null),
    request('control', 'GET', fc.tuple(modelSegment, fc.constantFrom('0', '1', '-1', 'x', '1e3', '%zz')).map(([m, s]) => `/api/models/${m}/checkpoints/${s}/archive`), 'control', null),
    request('control', 'GET', query(['model', 'taskId', 'kind', 'state', 'client', 'policyVersion', 'createdFrom', 'createdBefore', 'sort', 'step', 'episodeIds', 'limit', 'offset']).map((q) => `/api/episodes${q}`), 'control', null),
    request('control', 'GET', query(['model', 'kind', 'state', 'client', 'policyVersion', 'createdFrom', 'step', 'mode']).map((q) => `/api/episodes.jsonl${q}`), 'control', null),
    request('control', 'GET', query(['limit', 'offset']).map((q) => `/api/runs${q}`), 'control', null),
    request('control', 'GET', fc.tuple(runSegment, runSegment).map(([a, b]) => `/api/runs/compare?ids=${a},${b}`), 'control', null),
    request('control', 'GET', fc.tuple(runSegment, fc.constantFrom('', '/steps', '/steps.csv', '/steps.jsonl', '/evals', '/tasks'), query(['after', 'limit'])).map(([r, p, q]) => `/api/runs/${r}${p}${q}`), 'control', null),
    request('control', 'PATCH', runSegment.map((r) => `/api/runs/${r}/config`), 'control', validRunConfigBody),
    request('control', 'GET', episodeSegment.map((e) => `/api/episodes/${e}`), 'control', null),
    request('control', 'GET', fc.tuple(episodeSegment, query(['mode'])).map(([e, q]) => `/api/episodes/${e}/export${q}`), 'control', null),
    request('control', 'GET', fc.constant('/api/clients'), 'control', null),
    request('control', 'POST', fc.constant('/api/clients'), 'control', validAttachBody),
    request('control', 'GET', clientSegment.map((c) => `/api/clients/${c}`), 'control', null),
    request('control', 'GET', fc.tuple(clientSegment, query(['limit'])).map(([c, q]) => `/api/clients/${c}/runs${q}`), 'control', null),
    request('control', 'POST', fc.tuple(clientSegment, fc.constantFrom('pause', 'resume', 'key')).map(([c, a]) => `/api/clients/${c}/${a}`), 'control', null),
    request('control', 'DELETE', fc.tuple(clientSegment, query(['abort'])).map(([c, q]) => `/api/clients/${c}${q}`), 'control', null),
    request('control', 'GET', query(['q', 'model', 'taskId', 'kind', 'state', 'limit', 'offset']).map((q) => `/api/ui/episodes${q}`), 'control', null),
    request('control', 'GET', query(['model']).map((q) => `/api/ui/savings${q}`), 'control', null),
    request('control', 'GET', episodeSegment.map((e) => `/api/ui/episodes/${e}/merge`), 'control', null),
    request('control', 'GET', fc.constantFrom('/api/swarm', '/api/peers', '/api/p2p/weights', '/api/events', '/api', '/api/'), 'control', null),
    request('control', 'POST', fc.constant('/api/swarm/create'), 'control', validSwarmCreate),
    request('control', 'POST', fc.constant('/api/swarm/join'), 'control', validSwarmJoin),
    request('control', 'POST', fc.constant('/api/swarm/leave'), 'control', null),
    request('control', 'PUT', fc.constantFrom('/api/status', '/api/clients', '/api/episodes/{ep}'), 'control', null),
  ],
);

// ---- raw requests ---------------------------------------------------------------------------------------------

const rawMethod = fc.oneof(
  { arbitrary: fc.constantFrom('GET', 'POST', 'DELETE'), weight: 6 },
  { arbitrary: fc.constantFrom('PUT', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE', 'CONNECT', 'PRI', 'M-SEARCH', 'get', 'G ET', '', 'X'.repeat(100), '\u0000GET', 'POST\t', 'QUERY'), weight: 3 },
);
const rawTarget = fc.oneof(
  { arbitrary: fc.constantFrom('/api/status', '/swarm/v1/status', '/v1/chat/completions', '/swarm/v1/episodes', '/api/episodes/{ep}', '/swarm/v1/episodes/{ep}/end', '/'), weight: 4 },
  {
    arbitrary: fc.constantFrom(
      '//[',
      '//',
      '//[::1]/api/status',
      '/api/%zz',
      '/api/episodes/%',
      '/api/episodes/%E0%A4%A',
      '/api/episodes/%00',
      '/api/episodes/%2e%2e%2f%2e%2e',
      '/v1/chat/completions?x=%zz',
      'http://127.0.0.1:{port}/api/status',
      'http://localhost:{port}/swarm/v1/status',
      'http://evil.example/api/status',
      'https://[::1]/',
      'http://[/',
      'http://127.0.0.1:{port}@evil.example/api/status',
      '*',
      'api/status',
      '/api/status#frag',
      '/api/status?' + 'a=1&'.repeat(2000),
      '/' + 'a'.repeat(9000),
      '/api/ui/episodes?q=%ff%fe',
      '/api/episodes?limit=-1&offset=-5',
      '/api/episodes?limit=1e400',
      '/\u00e9t\u00e9',
      '/api/../api/status',
      '/..%2f..%2f..%2fetc%2fpasswd',
      '/%2e%2e/package.json',
      '/assets/..%5c..%5cpackage.json',
      '/index.html%00.js',
      '/api/events?token={token}',
      '/api\\status',
      '/api/status;x=1',
    ),
    weight: 6,
  },
);
const rawVersion = fc.oneof(
  { arbitrary: fc.constant('HTTP/1.1'), weight: 8 },
  { arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.1x', 'HTTX/1.1', '', 'HTTP/1.1 extra'), weight: 2 },
);
const rawHeader = fc.constantFrom(
  'Host: localhost:{port}',
  'Host: evil.example',
  'Host: 127.0.0.1:{port}\r\nHost: evil.example',
  'Host: ',
  'Host: [::1]:{port}',
  'Host: 127.0.0.1.nip.io',
  'Host: 127.0.0.1:{port}:1',
  'Authorization: Bearer {token}',
  'Authorization: Bearer {key}',
  'Authorization: Bearer',
  'Authorization: Basic e3Rva2VufQ==',
  'Authorization: Bearer {token}\r\nAuthorization: Bearer wrong',
  'Authorization: Bearer ' + 'A'.repeat(4000),
  'Content-Type: application/json',
  'Content-Type: text/plain',
  'Content-Length: -1',
  'Content-Length: abc',
  'Content-Length: 5\r\nContent-Length: 6',
  'Content-Length: 99999999999999999999',
  'Content-Length: 0',
  'Transfer-Encoding: chunked',
  'Transfer-Encoding: gzip, chunked',
  'Transfer-Encoding: chunked\r\nContent-Length: 3',
  'Transfer-Encoding: identity',
  'Origin: http://evil.example',
  'Origin: null',
  'Origin: http://127.0.0.1:{port}',
  'Expect: 100-continue',
  'Connection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
  'Connection: keep-alive',
  'X-Big: ' + 'a'.repeat(HUGE_HEADER_BYTES),
  'Bad Header: x',
  'X-Null: a\u0000b',
  'X-Utf8: \u00e9\u00e9',
  ' folded: continued',
  ': no-name',
  'no-colon',
);
const rawBody = fc.oneof(
  { arbitrary: fc.constant(''), weight: 4 },
  { arbitrary: fc.constantFrom('{"model":"tiny","taskId":"t"}', '{"reward":1}', '{"reason":"r"}', '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":1}', '{', 'null'), weight: 4 },
  { arbitrary: fc.constantFrom('4\r\n{"a"\r\n0\r\n\r\n', 'zz\r\nxx\r\n', '0\r\n\r\n', 'FFFFFFFFFFFFFFFF\r\n'), weight: 2 },
  { arbitrary: fc.constant('GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nGARBAGE\r\n\r\n'), weight: 1 },
  { arbitrary: fc.constant('x'.repeat(HUGE_BODY_BYTES)), weight: 1 },
);

export const rawRequest: fc.Arbitrary<FuzzRequest> = fc
  .record({
    method: rawMethod,
    target: rawTarget,
    version: rawVersion,
    host: fc.boolean(),
    headers: fc.array(rawHeader, { maxLength: 3 }),
    body: rawBody,
    contentLength: fc.boolean(),
    episode: fc.nat(),
  })
  .map((r): FuzzRequest => {
    const lines = [`${r.method} ${r.target} ${r.version}`.replace(/ $/, '')];
    if (r.host) lines.push('Host: 127.0.0.1:{port}');
    lines.push(...r.headers);
    if (!r.headers.some((h) => /^connection:/i.test(h))) lines.push('Connection: close');
    if (r.contentLength && r.body.length > 0 && !r.headers.some((h) => /^(content-length|transfer-encoding):/i.test(h))) lines.push(`Content-Length: ${Buffer.byteLength(r.body)}`);
    const raw = Buffer.from(`${lines.join('\r\n')}\r\n\r\n${r.body}`, 'utf8');
    return {
      family: 'raw',
      variant: `raw:${[r.host ? 'host' : 'no-host', ...r.headers.map((h) => h.slice(0, 24))].join('|')}`,
      method: r.method,
      target: r.target,
      episode: r.episode,
      auth: 'none',
      contentType: null,
      body: null,
      raw,
    };
  });

export const requestOf: Record<Family, fc.Arbitrary<FuzzRequest>> = {
  gateway: gatewayRequest,
  swarm: swarmRequest,
  control: controlRequest,
  raw: rawRequest,
};

/** Every family, equally often. */
export const anyRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(...FAMILIES.map((f) => requestOf[f]));

// ---- serialising --------------------------------------------------------------------------------------------

export interface SendContext {
  port: number;
  token: string;
  /** The batch's pool of live episodes (may be empty). */
  episodes: readonly { id: string; apiKey: string }[];
}

function fill(text: string, req: FuzzRequest, ctx: SendContext): string {
  const episode = ctx.episodes.length > 0 ? ctx.episodes[req.episode % ctx.episodes.length] : { id: 'no-episode', apiKey: 'no-key' };
  return text.replaceAll('{port}', String(ctx.port)).replaceAll('{token}', ctx.token).replaceAll('{ep}', episode.id).replaceAll('{key}', episode.apiKey);
}

function authHeader(req: FuzzRequest, ctx: SendContext): string | null {
  switch (req.auth) {
    case 'control':
      return 'Bearer {token}';
    case 'episode-key':
      return 'Bearer {key}';
    case 'none':
      return null;
    case 'wrong':
      return 'Bearer wrong-token-for-fuzz';
    case 'malformed':
      return fill('Bearer{token}', req, ctx);
  }
}

/** The request's bytes for this peer and pool. */
export function serialize(req: FuzzRequest, ctx: SendContext): Buffer {
  if (req.raw) return Buffer.from(fill(req.raw.toString('latin1'), req, ctx), 'latin1');
  const headers = [`${req.method} ${fill(req.target, req, ctx)} HTTP/1.1`, `Host: 127.0.0.1:${ctx.port}`, 'Connection: close'];
  const auth = authHeader(req, ctx);
  if (auth !== null) headers.push(`Authorization: ${fill(auth, req, ctx)}`);
  if (req.contentType !== null) headers.push(`Content-Type: ${req.contentType}`);
  if (req.body) headers.push(`Content-Length: ${req.body.length}`);
  return Buffer.concat([Buffer.from(headers.join('\r\n') + '\r\n\r\n', 'latin1'), req.body ?? Buffer.alloc(0)]);
}

/** One line for a report: enough to see the input and replay it with the seed. */
export function describeRequest(req: FuzzRequest): string {
  const body = req.raw ? req.raw.toString('latin1') : (req.body?.toString('utf8') ?? '');
  const preview = JSON.stringify(body.length > 200 ? `${body.slice(0, 200)}…(${body.length} bytes)` : body);
  return `${req.family}/${req.variant} ${JSON.stringify(req.method)} ${JSON.stringify(req.target.length > 120 ? req.target.slice(0, 120) + '…' : req.target)} auth=${req.auth} ct=${req.contentType} body=${preview}`;
}
