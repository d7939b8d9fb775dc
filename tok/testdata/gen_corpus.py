"""Write the tokenizer parity corpus (JSON lines, one document per line) to stdout.

Deterministic: a fixed seed for Faker (pinned in testdata/requirements.txt)
and for random. About 1.3 MB across scripts and shapes of text that break
tokenizers: many locales, code-like text, emoji with ZWJ sequences and skin
tones, long whitespace runs, tab/newline mixes, numbers, special tokens
written inline, and text that is not NFC.

Usage: .venv/bin/python tok/testdata/gen_corpus.py > corpus.jsonl
"""
import datetime
import json
import random
import sys
import unicodedata

from faker import Faker

SEED = 20261130
LOCALES = ["en_US", "ja_JP", "zh_CN", "ko_KR", "ru_RU", "ar_AA", "he_IL", "hi_IN", "th_TH",
           "el_GR", "de_DE", "fr_FR", "es_ES", "vi_VN", "tr_TR", "pl_PL", "uk_UA", "fa_IR",
           "bn_BD", "ka_GE", "hy_AM", "cs_CZ", "pt_BR", "it_IT", "zh_TW", "ta_IN"]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>",
            "<|start_header_id|>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>",
            "[CLS]", "[SEP]", "[MASK]", "<think>", "</think>", "<tool_call>", "<unk>", "<pad>"]
EMOJI = ["😀", "🤣", "🥰", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍🚀", "❤️", "🇯🇵", "🇺🇸",
         "✋🏻", "🫠", "🦀", "🐍", "☕", "👁️‍🗨️", "🤷‍♀️", "1️⃣", "©️"]
WS = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \t \n",
      "\u00a0", "\u3000", "\u2003", "        ", "\n\n\n\n", "\v", "\f", "\u2028", "\u0085"]
IDENTS = ["x", "value", "ctx", "buf", "err", "tokenizer", "_private", "HTTPServer", "i", "j2",
          "camelCase", "snake_case_name", "CONSTANT", "ÄÖÜ", "naïve", "π", "数据"]


def code(rnd):
    name = rnd.choice(IDENTS)
    kind = rnd.randrange(4)
    if kind == 0:
        body = "".join("\t%s := %s(%s, %d)\n" % (rnd.choice(IDENTS), rnd.choice(IDENTS), rnd.choice(IDENTS), rnd.randrange(-999, 99999))
                       for _ in range(rnd.randrange(1, 6)))
        return "func %s(%s int) error {\n%s\tif err != nil {\n\t\treturn fmt.Errorf(\"cannot %s: %%w\", err)\n\t}\n\treturn nil\n}\n" % (name, rnd.choice(IDENTS), body, name)
    if kind == 1:
        body = "".join("    %s = %s[%d:%d] + %r\n" % (rnd.choice(IDENTS), rnd.choice(IDENTS), rnd.randrange(9), rnd.randrange(-9, 99), rnd.choice(IDENTS))
                       for _ in range(rnd.randrange(1, 6)))
        return "def %s(self, *args, **kwargs):\n    \"\"\"Doc for %s.\"\"\"\n%s    return {'k': [1, 2.5e-3, None, True]}\n\n" % (name, name, body)
    if kind == 2:
        return json.dumps({rnd.choice(IDENTS): [rnd.random(), rnd.randrange(10**9), rnd.choice(IDENTS)]}, ensure_ascii=rnd.random() < 0.5, indent=rnd.choice([None, 2, 4])) + "\n"
    return "<div class=\"%s\">&nbsp;%s</div>\n// TODO(%s): x <= y && y != z || a->b; i++; s[i] = '\\0';\n" % (name, rnd.choice(IDENTS), name)


def numbers(rnd):
    parts = [str(rnd.randrange(10**rnd.randrange(1, 15))), "%.6f" % rnd.uniform(-1e6, 1e6), "1,234,567.89",
             "3.14159", "0x%X" % rnd.randrange(1 << 32), "١٢٣٤٥", "१२३", "２０２６年", "½ ⅔ ²³", "10^9", "-42", "1e-10"]
    return " ".join(rnd.sample(parts, rnd.randrange(2, len(parts))))


def doc(rnd, fakers):
    fk = rnd.choice(fakers)
    kind = rnd.randrange(10)
    if kind <= 3:
        text = fk.paragraph(nb_sentences=rnd.randrange(1, 8))
    elif kind == 4:
        text = code(rnd)
    elif kind == 5:
        text = " ".join(rnd.choice(EMOJI) + rnd.choice(["", " ", "x", fk.word()]) for _ in range(rnd.randrange(2, 12)))
    elif kind == 6:
        text = rnd.choice(WS).join(fk.words(rnd.randrange(2, 12))) + rnd.choice(WS) * rnd.randrange(1, 40)
    elif kind == 7:
        text = numbers(rnd) + " " + fk.address()
    elif kind == 8:
        words = fk.words(rnd.randrange(3, 10))
        for _ in range(rnd.randrange(1, 4)):
            words.insert(rnd.randrange(len(words) + 1), rnd.choice(SPECIALS) + rnd.choice(["", " ", "\n"]))
        text = rnd.choice(["", " "]).join(words)
    else:
        text = fk.name() + ": " + fk.sentence() + " " + fk.email() + " " + fk.url() + " " + fk.date_time_between(datetime.datetime(2000, 1, 1), datetime.datetime(2025, 1, 1)).isoformat()
    r = rnd.random()
    if r < 0.12:
        text = unicodedata.normalize("NFD", text)
    elif r < 0.16:
        text = unicodedata.normalize("NFKD", text)
    if rnd.random() < 0.1:
        text = rnd.choice(WS) * rnd.randrange(1, 6) + text
    if rnd.random() < 0.1:
        text = text.upper()
    return text


def main():
    rnd = random.Random(SEED)
    Faker.seed(SEED)
    fakers = [Faker(loc) for loc in LOCALES]
    for i, fk in enumerate(fakers):
        fk.seed_instance(SEED + i)
    total, target = 0, int(sys.argv[1]) if len(sys.argv) > 1 else 1_300_000
    out = sys.stdout
    while total < target:
        text = doc(rnd, fakers)
        line = json.dumps(text, ensure_ascii=False)
        out.write(line + "\n")
        total += len(text.encode("utf-8"))


if __name__ == "__main__":
    main()
