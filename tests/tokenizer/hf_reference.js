// Encodes texts with the Hugging Face `tokenizers` npm package (the reference for tokenizer.json).
// stdin: {"file": ".../tokenizer.json", "texts": [{"name": ..., "text": ...}]}
// stdout: [{"name", "add_special", "ids", "decoded"}] (decoded = decode(ids, skipSpecialTokens=false)).
const { Tokenizer } = require('tokenizers');
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
(async () => {
  const tok = Tokenizer.fromFile(input.file);
  const out = [];
  for (const t of input.texts) {
    for (const addSpecial of [false, true]) {
      const enc = await tok.encode(t.text, null, { addSpecialTokens: addSpecial });
      const ids = enc.getIds();
      out.push({ name: t.name, add_special: addSpecial, ids, decoded: await tok.decode(ids, false) });
    }
  }
  process.stdout.write(JSON.stringify(out));
})();
