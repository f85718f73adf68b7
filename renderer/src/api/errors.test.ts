import { describe, expect, it } from 'vitest';
import { ControlApiError, errorFromResponse } from './errors.ts';

const json = (body: unknown, status: number) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

describe('errorFromResponse', () => {
  it("rebuilds the server's error with its name and field", async () => {
    const error = await errorFromResponse(json({ error: { name: 'ValidationError', message: 'bad', field: 'model' } }, 400));
    expect(error).toBeInstanceOf(ControlApiError);
    expect(error.name).toBe('ValidationError');
    expect(error.field).toBe('model');
    expect(error.isUnauthorised).toBe(false);
  });

  it('marks 401 as unauthorised even without a JSON body', async () => {
    const error = await errorFromResponse(new Response('nope', { status: 401 }));
    expect(error.name).toBe('UnauthorisedError');
    expect(error.isUnauthorised).toBe(true);
  });

  it('names other bodies HttpError with the status', async () => {
    const error = await errorFromResponse(json({ unexpected: true }, 502));
    expect(error.name).toBe('HttpError');
    expect(error.status).toBe(502);
  });
});
