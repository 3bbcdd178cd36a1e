// Renders the chat-template fixtures with Hugging Face's own Jinja implementation (@huggingface/jinja, the one
// transformers.js applies chat templates with):  npm install @huggingface/jinja && node make_fixtures.mjs
// Writes fixtures.json: each published template (templates.json) applied to each conversation, with and
// without the generation prompt; "error" where the template raises an exception.
import { Template } from "@huggingface/jinja";
import { readFileSync, writeFileSync } from "fs";

const templates = JSON.parse(readFileSync(new URL("./templates.json", import.meta.url)));
const conversations = [
  [{ role: "system", content: "You are a helpful assistant" }, { role: "user", content: "Hello" },
   { role: "assistant", content: "Hi there" }, { role: "user", content: "Who are you" },
   { role: "assistant", content: "   I am an assistant   " }, { role: "user", content: "Another question" }],
  [{ role: "user", content: "  What is 2 + 2?\n" }],
  [{ role: "system", content: "Réponds en français.\nSois bref." }, { role: "user", content: "Qu'est-ce qu'un λ ? 🙂" }],
  [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: "c\n\nd" }],
  [{ role: "user", content: "first" }, { role: "user", content: "two user turns in a row" }],
  [{ role: "system", content: "First rule." }, { role: "user", content: " x " }, { role: "system", content: "Second." },
   { role: "assistant", content: "<think>\nok\n</think>\n\ny" }],
];
const cases = [];
for (const [name, t] of Object.entries(templates)) {
  if (!t.supported) continue;
  const tpl = new Template(t.source);
  conversations.forEach((messages, i) => {
    for (const add_generation_prompt of [false, true]) {
      let expected = null;
      try {
        // (raise_exception is built in: it throws, as in transformers.)
        expected = tpl.render({ messages, add_generation_prompt, bos_token: t.bos_token, eos_token: t.eos_token });
      } catch (e) {
        if (process.env.DEBUG) console.error(name, i, e.message);
        expected = null;
      }
      cases.push({ template: name, conversation: i, add_generation_prompt, expected });
    }
  });
}
writeFileSync(new URL("./fixtures.json", import.meta.url),
              JSON.stringify({ generator: "@huggingface/jinja " + JSON.parse(readFileSync(new URL("./node_modules/@huggingface/jinja/package.json", import.meta.url))).version,
                               conversations, cases }, null, 1) + "\n");
