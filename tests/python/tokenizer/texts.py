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
