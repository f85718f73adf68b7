/**
 * The zod schema of a JSON object the chat template writes back (a tool's `parameters` / `input_schema`, an
 * Anthropic `tool_use.input`) in the gateway APIs: any JSON object, kept as the very object the body parser made. `z.record` would copy it, and the copy would lose the JSON source the
 * gateway keeps for tools (key order and number texts as the client wrote them, which the chat template's `tojson`
 * writes back as Python would: worker/tokenizer/python-json.ts).
 */
import { z } from 'zod';

export const parsedJsonObject = z.custom<Record<string, unknown>>(
  (value) => value !== null && typeof value === 'object' && !Array.isArray(value),
  'expected a JSON object',
);
