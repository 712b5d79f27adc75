// The official OpenAI SDK for Node, unchanged but for its base URL and key,
// against a real Herald (run by TestOfficialNodeSDK). Prints one JSON object
// with what each call returned.
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.HERALD_URL + '/v1', apiKey: process.env.HERALD_KEY });
const out = {};

const r1 = await client.responses.create({
  model: 'herald', input: 'say: The capital of France is Paris.', instructions: 'Answer briefly.',
  metadata: { case: 'one' }, reasoning: { effort: 'low' },
});
out.r1 = { id: r1.id, object: r1.object, status: r1.status, text: r1.output_text, usage: r1.usage,
  metadata: r1.metadata, session: r1.session_id };

const stream = await client.responses.create({ model: 'herald', input: 'say: Streamed through Herald.', stream: true });
const events = [];
let deltas = '';
let completed = null;
for await (const ev of stream) {
  events.push([ev.type, ev.sequence_number]);
  if (ev.type === 'response.output_text.delta') deltas += ev.delta;
  if (ev.type === 'response.completed') completed = ev.response;
}
out.stream = { events, deltas, completed: completed && completed.output[0].content[0].text, status: completed && completed.status };

const r2 = await client.responses.create({ model: 'herald', input: 'what did I ask?', previous_response_id: r1.id });
out.r2 = { id: r2.id, text: r2.output_text, session: r2.session_id, previous: r2.previous_response_id };

const again = await client.responses.retrieve(r1.id);
out.retrieved = { id: again.id, text: again.output_text, status: again.status };

const { data: chat, response } = await client.chat.completions.create({
  model: 'herald', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'say: Chat through Herald.' }],
}).withResponse();
out.chat = { object: chat.object, text: chat.choices[0].message.content, finish: chat.choices[0].finish_reason,
  usage: chat.usage, session: response.headers.get('x-herald-session') };

const chunks = await client.chat.completions.create({
  model: 'herald', messages: [{ role: 'user', content: 'say: Streamed chat.' }], stream: true,
  stream_options: { include_usage: true },
}, { headers: { 'X-Herald-Session': out.chat.session } });
let chatText = '';
let usage = null;
let finish = null;
for await (const c of chunks) {
  if (c.choices.length > 0) {
    chatText += c.choices[0].delta.content ?? '';
    finish = c.choices[0].finish_reason ?? finish;
  }
  if (c.usage) usage = c.usage;
}
out.chatStream = { text: chatText, usage, finish };

try {
  await client.responses.create({ model: 'herald', input: 'x',
    tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }] });
  out.tools = 'accepted';
} catch (e) {
  out.tools = { status: e.status, code: e.code, type: e.type, message: e.message };
}
console.log(JSON.stringify(out));
