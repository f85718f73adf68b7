/** Conversations shared by the tokenizer tests. */
import type { ChatMessage, ToolSpec } from './types.ts';

export const weatherTool: ToolSpec = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
  },
};

export const toolConversation: ChatMessage[] = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Weather in Paris and Rome?' },
  {
    role: 'assistant',
    content: 'Checking both.',
    tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
      { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Rome"}' } },
    ],
  },
  { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call_1' },
  { role: 'tool', content: '{"temp": 25}', tool_call_id: 'call_2' },
];

/** A tokenizer.json small enough to load instantly: byte-level BPE over "h", "i", "Ġ" with one merge, plus ChatML specials. */
export const tinyTokenizerJson = {
  version: '1.0',
  added_tokens: [
    {
      id: 4,
      content: '<|im_start|>',
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    },
    {
      id: 5,
      content: '<|im_end|>',
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    },
  ],
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
  post_processor: null,
  decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
  model: {
    type: 'BPE',
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    vocab: { h: 0, i: 1, Ġ: 2, hi: 3 },
    merges: ['h i'],
  },
};
