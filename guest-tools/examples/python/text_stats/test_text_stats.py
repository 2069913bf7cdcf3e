"""Unit tests of text_stats under the host's CPython, with componentize-py's generated bindings.

    componentize-py -d ../../../../wit -w tool bindings /tmp/text-stats-bindings
    PYTHONPATH=/tmp/text-stats-bindings python3 -m unittest -v test_text_stats

(`build.sh` does not run them; the component itself is tested end to end in tests/examples.rs.)
"""

import collections
import json
import os
import random
import tempfile
import unittest

import text_stats
from componentize_py_types import Err


class TextStatsTest(unittest.TestCase):
    def setUp(self):
        self.previous = os.getcwd()
        self.dir = tempfile.TemporaryDirectory()
        os.chdir(self.dir.name)
        self.tool = text_stats.WitWorld()

    def tearDown(self):
        os.chdir(self.previous)
        self.dir.cleanup()

    def write(self, name, data):
        with open(name, "wb") as file:
            file.write(data if isinstance(data, bytes) else data.encode())

    def call(self, **input):
        return json.loads(self.tool.call(json.dumps(input)))

    def error(self, raw):
        with self.assertRaises(Err) as caught:
            self.tool.call(raw)
        variant = caught.exception.value
        return type(variant).__name__.removeprefix("ToolError_"), variant.value

    def test_describe(self):
        descriptor = self.tool.describe()
        self.assertEqual(descriptor.name, "text_stats")
        schema = json.loads(descriptor.input_schema)
        self.assertEqual(schema["required"], ["path"])
        self.assertIs(schema["additionalProperties"], False)
        self.assertEqual([(p.pointer, p.access.name) for p in descriptor.paths], [("/path", "READ")])

    def test_counts(self):
        self.write("a.txt", "Hello world, hello WORLD.\nDon't stop\n")
        stats = self.call(path="a.txt")
        self.assertEqual(
            stats,
            {
                "path": "a.txt",
                "lines": 2,
                "words": 6,
                "characters": 37,
                "bytes": 37,
                "average_word_length": 4.83,
                "unique_words": 4,
                "top_words": [
                    {"word": "hello", "count": 2},
                    {"word": "world", "count": 2},
                    {"word": "don't", "count": 1},
                    {"word": "stop", "count": 1},
                ],
            },
        )
        self.assertEqual(len(self.call(path="a.txt", top=1)["top_words"]), 1)
        self.assertEqual(self.call(path="a.txt", top=0)["top_words"], [])
        self.write("e.txt", "")
        self.assertEqual(self.call(path="e.txt")["lines"], 0)
        self.write("u.txt", "Straße STRASSE été\nno newline")
        stats = self.call(path="u.txt")
        self.assertEqual((stats["lines"], stats["characters"], stats["bytes"]), (2, 29, 32))
        self.assertEqual(stats["top_words"][0], {"word": "strasse", "count": 2})

    def test_chunk_boundaries_do_not_change_the_counts(self):
        rnd = random.Random(1)
        alphabet = ["a", "B", "é", "日", "\u2019", "'", " ", "\n", "\t", "_", "1", ".", "\U0001F600"]
        chunk = text_stats.CHUNK_BYTES
        try:
            for _ in range(200):
                text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 120)))
                self.write("r.txt", text)
                text_stats.CHUNK_BYTES = rnd.randint(1, 7)
                stats = text_stats.analyse("r.txt", 100)
                words = text_stats.WORD.findall(text)
                counts = collections.Counter(w.casefold() for w in words)
                lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
                self.assertEqual(
                    (stats["lines"], stats["words"], stats["characters"], stats["unique_words"]),
                    (lines, len(words), len(text), len(counts)),
                    text,
                )
                self.assertEqual({d["word"]: d["count"] for d in stats["top_words"]}, dict(counts))
        finally:
            text_stats.CHUNK_BYTES = chunk

    def test_errors(self):
        self.write("bad.txt", "ok\nab\xff".encode("latin-1"))
        self.write("big.txt", b"x" * (text_stats.MAX_FILE_BYTES + 1))
        os.mkdir("dir")
        cases = [
            ('{"path":"nope.txt"}', "NotFound", "nope.txt"),
            ('{"path":"bad.txt"}', "Failed", "not UTF-8 text: invalid byte sequence at byte offset 5"),
            ('{"path":"big.txt"}', "Failed", "is too large"),
            ('{"path":"dir"}', "Failed", "is a directory"),
            ("nope", "InvalidInput", "not a JSON object"),
            ("[]", "InvalidInput", "expected a JSON object"),
            ("{}", "InvalidInput", "missing field `path`"),
            ('{"path":"a","path":"b"}', "InvalidInput", "duplicate field `path`"),
            ('{"path":"a","extra":1}', "InvalidInput", "unknown field `extra`"),
            ('{"path":"a","top":101}', "InvalidInput", "between 0 and 100"),
            ('{"path":"a","top":true}', "InvalidInput", "must be an integer"),
            ('{"path":"a","top":NaN}', "InvalidInput", "not valid JSON"),
            ('{"path":"/etc/passwd"}', "InvalidInput", "relative to the root"),
            ('{"path":"../x"}', "InvalidInput", "must not contain `..`"),
            ('{"path":"a/../../x"}', "InvalidInput", "must not contain `..`"),
            ('{"path":""}', "InvalidInput", "must not be empty"),
        ]
        for raw, kind, fragment in cases:
            with self.subTest(raw=raw):
                got_kind, message = self.error(raw)
                self.assertEqual(got_kind, kind, message)
                self.assertIn(fragment, message)

    def test_integral_float_top_is_accepted(self):
        self.write("a.txt", "a b a")
        self.assertEqual(len(self.call(path="a.txt", top=1.0)["top_words"]), 1)


if __name__ == "__main__":
    unittest.main()
