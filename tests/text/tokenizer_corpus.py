"""Texts for comparing our tokenizer with Hugging Face `tokenizers`, generated at test time from a
seeded RNG: many scripts, emoji (ZWJ sequences, flags, skin tones, keycaps), combining marks in
NFC and NFD, code, whitespace runs, CRLF, digit runs, English contractions, added/special tokens
inside text, and random assigned Unicode code points.

Random code points are drawn only from characters assigned in Python's unicodedata
(Unicode 14.0 on Python 3.11), the version the linked PCRE2 10.42 uses for \\p{L}/\\p{N};
characters assigned later would be classified by tokenizers' newer Oniguruma tables only.
"""
import glob
import random
import unicodedata

SCRIPT_RANGES = {
    "latin": [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0xFF), (0x100, 0x17F)],
    "cyrillic": [(0x410, 0x44F), (0x451, 0x451)],
    "greek": [(0x391, 0x3A9), (0x3B1, 0x3C9), (0x386, 0x38F)],
    "arabic": [(0x621, 0x64A), (0x64B, 0x652), (0x660, 0x669)],
    "hebrew": [(0x5D0, 0x5EA), (0x5B0, 0x5BC)],
    "devanagari": [(0x905, 0x939), (0x93E, 0x94D), (0x966, 0x96F)],
    "thai": [(0xE01, 0xE2E), (0xE31, 0xE3A), (0xE40, 0xE4E), (0xE50, 0xE59)],
    "cjk": [(0x4E00, 0x9FFF), (0x3040, 0x309F), (0x30A0, 0x30FF)],
    "hangul": [(0xAC00, 0xD7A3)],
}

PHRASES = [
    "Hello, world! How are you doing today?",
    "Привет, мир! Как дела?",
    "Γειά σου κόσμε, τι κάνεις;",
    "مرحبا بالعالم، كيف حالك؟",
    "שלום עולם, מה שלומך?",
    "नमस्ते दुनिया, आप कैसे हैं?",
    "สวัสดีชาวโลก คุณสบายดีไหม",
    "你好，世界！今天天气怎么样？",
    "こんにちは世界、お元気ですか？",
    "안녕하세요 세계, 잘 지내세요?",
    "Tiếng Việt có dấu: Nguyễn Văn Đức",
    "Ünïcödé façade naïve café résumé coöperate",
    "ﬁ ﬂ ﬀ ligatures and ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "½ ¼ ² ³ ⅓ Ⅻ ⑩ №",
]

EMOJI = [
    "😀", "😂🤣", "👍🏽", "👨‍👩‍👧‍👦", "🧑🏿‍💻", "🏳️‍🌈", "🇺🇸🇫🇷🇯🇵", "🇩🇪", "1️⃣#️⃣", "❤️‍🔥",
    "👩‍❤️‍💋‍👨", "🤷🏻‍♀️", "🐈‍⬛", "™©®", "⌚⏰", "🫠🪿",
]

CODE_SNIPPETS = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\r\n",
    'std::cout << "x=" << x << std::endl;',
    "if (a && b || !c) { return -1; } else if (x >= 0x1F) {}",
    "SELECT id, name FROM users WHERE age > 30 ORDER BY name;",
    "<div class=\"main\"><p>Hi &amp; bye</p></div>",
    "{\"key\": [1, 2.5, -3e10, null, true], \"s\": \"a\\nb\"}",
    "x = [i for i in range(10) if i % 2 == 0]\n\n\n",
    "    \t  indented\tline\n\t\tmore",
    "$ ls -la | grep '^d' > out.txt 2>&1",
]

CONTRACTIONS = [
    "I'm", "you're", "they've", "I'll", "he'd", "it's", "don't", "can't", "won't", "we're",
    "I'M", "YOU'RE", "THEY'VE", "I'LL", "HE'D", "IT'S", "DON'T", "It'S", "yOu'Re", "o'clock",
    "rock'n'roll", "'s", "'t", "'re'", "James's", "students'", "it’s", "don’t", "it'ſ", "'ſ",
    "'ＳＳ", "WE'RE'LL", "'İ'ı", "'ß", "'ẞ", "'ﬆ", "'Ｌｌ",
]

COMBINING = [chr(code) for code in range(0x300, 0x370)]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u2029", "\x0b",
          "\x0c", "\x85", "\u200b", "\u2003", "\u202f", "\u180e", "\ufeff"]


def _assigned(code):
    if 0xD800 <= code <= 0xDFFF:
        return False
    return unicodedata.category(chr(code)) not in ("Cn", "Cs")


def _script_word(rng, script, length):
    ranges = SCRIPT_RANGES[script]
    out = []
    while len(out) < length:
        low, high = rng.choice(ranges)
        code = rng.randint(low, high)
        if _assigned(code):
            out.append(chr(code))
    return "".join(out)


def _script_texts(rng, count):
    texts = []
    for _ in range(count):
        script = rng.choice(sorted(SCRIPT_RANGES))
        words = [_script_word(rng, script, rng.randint(1, 9)) for _ in range(rng.randint(1, 8))]
        separators = [rng.choice([" ", " ", " ", ", ", ". ", "\n", "  ", "-", ""]) for _ in words]
        texts.append("".join(word + sep for word, sep in zip(words, separators)))
    return texts


def _combining_texts(rng, count):
    texts = []
    for phrase in PHRASES[10:12]:
        texts.append(unicodedata.normalize("NFC", phrase))
        texts.append(unicodedata.normalize("NFD", phrase))
        texts.append(unicodedata.normalize("NFKD", phrase))
    for _ in range(count):
        base = rng.choice("aeiouAEIOUcnszgkQ ") if rng.random() < 0.8 else _script_word(rng, "latin", 1)
        marks = "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 4)))
        text = base + marks + _script_word(rng, "latin", rng.randint(0, 5))
        texts.append(text if rng.random() < 0.5 else unicodedata.normalize("NFD", text))
    # Hangul jamo sequences that NFC composes into syllables.
    for _ in range(count // 2):
        jamo = "".join(chr(rng.randint(0x1100, 0x1112)) + chr(rng.randint(0x1161, 0x1175)) +
                       (chr(rng.randint(0x11A8, 0x11C2)) if rng.random() < 0.5 else "")
                       for _ in range(rng.randint(1, 4)))
        texts.append(jamo + " " + jamo)
    return texts


def _python_sources(rng, count):
    files = sorted(glob.glob("/usr/lib/python3*/*.py"))
    texts = []
    for _ in range(count if files else 0):
        with open(rng.choice(files), encoding="utf-8", errors="replace") as handle:
            source = handle.read()
        start = rng.randint(0, max(0, len(source) - 1))
        texts.append(source[start:start + rng.randint(50, 1500)])
    return texts


def _whitespace_texts(rng, count):
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 8)):
            run = "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 6)))
            if rng.random() < 0.2:
                run = rng.choice(SPACES) * rng.randint(20, 400)
            parts.append(run)
            parts.append(rng.choice(["word", "x", "42", "!?", "Ünï", "漢字", ""]))
        texts.append("".join(parts))
    texts += [" " * 1000, "\n" * 300, "\t \t \n" * 50, "a" + " " * 257 + "b", "\r\n" * 100]
    return texts


def _digit_texts(rng, count):
    texts = []
    for _ in range(count):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40)))
        texts.append(rng.choice(["", "v", "$", "x=", "-"]) + digits +
                     rng.choice(["", ".5", ",000", " apples", "%", "e-3", "٣٤٥", "१२३"]))
    texts += ["3.14159265358979", "1,000,000.00", "2024-01-31T12:34:56Z", "0x7FFF_FFFF", "１２３"]
    return texts


def _contraction_texts(rng, count):
    texts = []
    for _ in range(count):
        words = [rng.choice(CONTRACTIONS) for _ in range(rng.randint(1, 5))]
        texts.append(" ".join(words) + rng.choice(["", ".", "!", "'", "''"]))
    return texts


def _added_token_texts(rng, tokens, count):
    if not tokens:
        return []
    fillers = ["", " ", "  ", "hi", " there ", "\n", "word", "x y", "é", "😀", "\t", "Full", "FULL"]
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(fillers))
            token = rng.choice(tokens)
            if rng.random() < 0.15 and len(token) > 2:
                token = token[: rng.randint(1, len(token) - 1)]  # a partial token
            parts.append(token)
        parts.append(rng.choice(fillers))
        texts.append("".join(parts))
    return texts


def _random_unicode(rng, count):
    texts = []
    planes = [(0x20, 0x2FF), (0x300, 0xFFFF), (0x10000, 0x1FFFF), (0x20000, 0x2FFFF),
              (0xE0000, 0xE007F)]
    weights = [3, 6, 2, 1, 1]
    for _ in range(count):
        chars = []
        while len(chars) < rng.randint(1, 30):
            low, high = rng.choices(planes, weights)[0]
            code = rng.randint(low, high)
            if _assigned(code):
                chars.append(chr(code))
        texts.append("".join(chars))
    return texts


def generate(seed, added_tokens=()):
    """Several hundred texts; `added_tokens` are contents to embed in some of them."""
    rng = random.Random(seed)
    texts = list(PHRASES) + list(EMOJI) + list(CODE_SNIPPETS)
    texts += ["".join(rng.choice(EMOJI) + rng.choice(["", " ", "a"]) for _ in range(5)) for _ in range(20)]
    texts += _script_texts(rng, 120)
    texts += _combining_texts(rng, 60)
    texts += _python_sources(rng, 40)
    texts += _whitespace_texts(rng, 60)
    texts += _digit_texts(rng, 40)
    texts += _contraction_texts(rng, 50)
    texts += _added_token_texts(rng, list(added_tokens), 80)
    texts += _random_unicode(rng, 300)
    texts += ["", "a", " a", "a ", "'", "''", "\x00", "\x00a\x01"]
    return texts
