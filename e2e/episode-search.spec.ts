/**
 * The Episodes view's search finds an episode by what was said in it, not only by its ids: episodes produced
 * through the real gateway (swarm protocol + chat completions) on a peer hosting the tiny model.
 */
import { expect, test } from './views/fixtures.ts';

interface Begun {
  episodeId: string;
  baseUrl: string;
  apiKey: string;
}

async function post<T>(url: string, key: string, body: unknown): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`POST ${url}: HTTP ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

/** One episode whose user says `words` (the task id says nothing of them). */
async function episodeSaying(peer: { origin: string; token: string }, taskId: string, words: string): Promise<string> {
  const begun = await post<Begun>(`${peer.origin}/swarm/v1/episodes`, peer.token, { model: 'tiny', taskId, kind: 'eval' });
  await post(`${begun.baseUrl}/chat/completions`, begun.apiKey, {
    model: 'tiny',
    messages: [{ role: 'user', content: words }],
    max_tokens: 4,
  });
  await post(`${peer.origin}/swarm/v1/episodes/${begun.episodeId}/end`, peer.token, { reward: 0 });
  return begun.episodeId;
}

test('search finds an episode by a rare word its conversation had', async ({ page, modelPeer, openView }, testInfo) => {
  const quokka = await episodeSaying(modelPeer, 'search-a', 'Please count the quokkas on Rottnest island.');
  const other = await episodeSaying(modelPeer, 'search-b', 'Please count the pelicans on the beach.');
  await openView('episodes');
  const rows = page.getByTestId('episode-row');
  await expect(page.locator(`[data-episode-id="${other}"]`)).toBeVisible();

  await page.getByTestId('episode-search').fill('quokkas');
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toHaveAttribute('data-episode-id', quokka);

  // Words anywhere in the conversation, any order, as prefixes: both episodes asked to count.
  await page.getByTestId('episode-search').fill('count pelic');
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toHaveAttribute('data-episode-id', other);
  await page.getByTestId('episode-search').fill('Please count');
  await expect(rows).toHaveCount(2);
  const file = testInfo.outputPath('episode-search.png');
  await page.screenshot({ path: file, fullPage: true });
  await testInfo.attach('episode-search', { path: file, contentType: 'image/png' });
});
