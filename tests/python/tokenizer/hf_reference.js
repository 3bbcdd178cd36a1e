// Encodes texts with the Hugging Face `tokenizers` npm package (the reference for tokenizer.json).
// stdin: {"file": ".../tokenizer.json", "texts": [{"name": ..., "text": ...}]}
// stdout: [{"name", "add_special", "ids", "decoded", "pieces"}] (decoded = decode(ids, skipSpecialTokens=false);
// pieces = the pre-tokenizer's split of the whole text, without add_special only).
const { Tokenizer } = require('tokenizers');
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
(async () => {
  const tok = Tokenizer.fromFile(input.file);
  const out = [];
  for (const t of input.texts) {
    for (const addSpecial of [false, true]) {
      const enc = await tok.encode(t.text, null, { addSpecialTokens: addSpecial });
      const ids = enc.getIds();
      const r = { name: t.name, add_special: addSpecial, ids, decoded: await tok.decode(ids, false) };
      // The pre-tokenizer alone on the whole text (byte-level characters): checks the split patterns.
      if (!addSpecial) r.pieces = tok.getPreTokenizer().preTokenizeString(t.text).map((p) => p[0]);
      out.push(r);
    }
  }
  process.stdout.write(JSON.stringify(out));
})();
