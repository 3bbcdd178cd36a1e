"""The texts every tokenizer fixture encodes (bytes: some are deliberately not valid UTF-8)."""

TEXTS = [
    ("english", "Hello world! The quick brown fox jumps over the lazy dog. It's, we'll, they've, I'd, you're."),
    ("german", "Grüße aus München: Straße, Äpfel und Öl für 3,50 €."),
    ("chinese", "我们在北京学习中文，今天天气很好。"),
    ("japanese", "東京は日本の首都です。ひらがなとカタカナ、漢字。"),
    ("arabic", "مرحبا بالعالم، كيف حالك اليوم؟"),
    ("hindi", "नमस्ते दुनिया, आप कैसे हैं?"),
    ("russian", "Привет, мир! Съешь же ещё этих мягких французских булок."),
    ("emoji", "I ❤️ tokenizers 🎉🚀 family: 👨‍👩‍👧‍👦 flag: 🇩🇪 thumbs: 👍🏽"),
    ("digits", "1 12 123 1234 12345 3.14159 2026-11-23 0x1F 1,000,000"),
    ("whitespace_runs", "a  b   c    d\t\te \t f     "),
    ("newlines", "line one\nline two\n\n\nline three\r\n  indented\n\t\ttabbed\n"),
    ("leading_space", "   leading and trailing   "),
    ("contractions_caps", "DON'T WON'T It'S I'M You'LL"),
    ("contractions_long_s", "it'\u017fa it'\u017f \u017f'sa"),
    ("punctuation", "a+b=c; (x*y)/z -> {k: v} [1] <tag/> ... !!! ??? @#$%^&"),
    ("mixed", "Code: def f(x): return x**2  # квадрат 平方 🔢"),
    ("empty", ""),
    ("single_space", " "),
    ("code_indent", "    if (a) {\n        b();\n    }\n"),
]

# Raw bytes that are not valid UTF-8 (a lone continuation byte, a truncated sequence, an overlong
# encoding, 0xFF). Reference libraries that take Python/JS strings cannot encode these.
INVALID_UTF8 = [
    ("invalid_lone_continuation", b"abc\x80def"),
    ("invalid_truncated", b"caf\xc3 and \xe6\x97 end"),
    ("invalid_overlong_ff", b"\xc0\xaf x \xff\xfe y"),
]


def random_texts(n=60, seed=13):
    """Deterministic random mixtures of the fragments the split patterns and normalizers treat
    differently (scripts, digit runs, whitespace kinds, contractions in any case, combining marks)."""
    import random
    rng = random.Random(seed)
    fragments = ["word", "Word", "WORDS", "Straße", "мир", "東京", "ひらがな", "مرحبا", "नमस्ते", "é", "e\u0301",
                 "'s", "'S", "'ll", "'LL", "'Re", "'ve", "'d", "'m", "'t", "'x", "1", "12", "1234", "٣٤٥", "½",
                 " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\u200d",
                 ".", ",", "!?", "...", "(", ")", "-", "_", "@", "#", "$", "€", "🎉", "👨‍👩‍👧", "🇩🇪", "👍🏽", "\u0301"]
    out = []
    for i in range(n):
        k = rng.randint(3, 14)
        out.append((f"random_{i:02d}", "".join(rng.choice(fragments) for _ in range(k))))
    return out

# The o200k split pattern's hard cases (letter subcategories: Lu/Lt start a word, Ll/Lm/Lo/M continue it; the
# contractions hang on words, in any case; marks; slashes after punctuation; whitespace runs with newlines).
O200K_TEXTS = [
    ("o200k_contractions", "don't DON'T Don'T dOn't I'M i'm WE'LL we'Ll they'VE You'Re it's IT'S it'\u017f X'\u017fa"),
    ("o200k_apostrophes", "'s 's's x's X'S 'S'S '''s ''ll O'Neil O'NEIL rock'n'roll '123 a'b' '\u017f"),
    ("o200k_camel", "HTTPServer getHTTPResponse CamelCaseWords ABCdef abcDEF NASA's iPhone eBay McDonald's"),
    ("o200k_titlecase", "\u01c5emal \u01c8ubljana \u01cbo \u01c4EMAL \u01c6emal \u1f88\u1f00 A\u01c5b \u01c5\u01c5"),
    ("o200k_modifier", "\u02b0\u02b2 \u02c8stress \u30fc \u30ab\u30bf\u30ab\u30ca\u30fc \u3005 \u30fca "
                       "A\u02b0B x\u02b0Y"),
    ("o200k_marks", "e\u0301 E\u0301 \u0301a a\u0301\u0302 Z\u0351\u0355ALGO x \u0301\u0301 1\u0301 !\u0301 "
                    "A\u0301B \u20dd \u0301"),
    ("o200k_lone_mark", "\u0301abc"),
    ("o200k_thai_korean", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \uc548\ub155\ud558\uc138\uc694 "
                          "\uc138\uacc4 \u0939\u093f\u0928\u094d\u0926\u0940"),
    ("o200k_digits", "1234567 \u0661\u0662\u0663\u0664\u0665 \u00bd\u2153 12,345.678 \u2460 \u216b 0x1F2E3 "
                     "x12345y 3rd 1st"),
    ("o200k_mixed_scripts", "\u041f\u0440\u0438\u0432\u0435\u0442World \u043c\u0438\u0440Hello "
                            "\u6771\u4eacTokyo Abc\u0394\u03ad\u03bb\u03c4\u03b1 \u03a3\u03bf\u03c6\u03af\u03b1"),
    ("o200k_whitespace", "a \n\n b\t\n\t c   \n   d\u3000\ne  \n\n  \t x\n"),
    ("o200k_crlf", "foo \r\n bar\r\n\r\n\tbaz \r\n a\rb\r\rc \r d\r"),
    ("o200k_slashes", "a/b //c ...\n/d !!\n\n//e ?/\r\n/ x </tag>\n/ http://x.y/z/ \\n"),
    ("o200k_prefixes", " Hello\tWorld,Hello 'Hello' \"Quote\" (Paren) [Br] {Cu} $Dollar #Hash -Minus _Under"),
    ("o200k_spaces", "a\u00a0b \u00a0 c\u2009d\u202f\u205fe \u00a0A\u2009B"),
    ("o200k_emoji", "\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd\U0001f44d \u2764\ufe0fHi "
                    "\U0001f1e9\U0001f1ea! a\u200db"),
]


def o200k_random_texts(n=40, seed=29):
    """Random mixtures of the fragments the o200k pattern treats differently."""
    import random
    rng = random.Random(seed)
    fragments = ["word", "Word", "WORD", "wORD", "HTTPs", "\u01c5", "\u02b0", "\u30fc", "\u6771", "e\u0301", "\u0301",
                 "\u0903", "'s", "'S", "'ll", "'LL", "'Re", "'ve", "'D", "'x", "\u017f", "1", "12345", "\u00bd", " ",
                 "  ", "\t", "\n", "\n\n", "\r\n", "\r", " \n ", "\u00a0", "\u3000", "/", "//", "!/", ".", ",", "?!",
                 "(", "-", "_", "@", "\U0001f389", "\u200d", "\u041c\u0438\u0440", "\u0394"]
    return [(f"o200k_random_{i:02d}", "".join(rng.choice(fragments) for _ in range(rng.randint(3, 14))))
            for i in range(n)]
