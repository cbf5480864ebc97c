"""Unit tests of pii.py on the host: python3 -m unittest discover -s plugins/lang/python/pii_guard"""

import unittest

import pii
from pii import ConfigError, Guard


def redact(text, **config):
    return Guard(config).redact(text)


class Finds(unittest.TestCase):
    def test_emails(self):
        self.assertEqual(redact("write to john.doe+news@mail.example.co.uk, or x@y.io."),
                         ("write to [email], or [email].", {"email": 2}))
        self.assertEqual(redact("no@address and a@b.c stay")[1], {})

    def test_phones(self):
        for phone in ("+49 30 1234567", "+1 (555) 123-4567", "+44 20 7946 0958", "555-123-4567",
                      "555.123.4567", "(555) 123-4567", "030 1234567", "0171/123 4567"):
            with self.subTest(phone=phone):
                self.assertEqual(redact(f"call {phone} now"), ("call [phone] now", {"phone": 1}))

    def test_a_phone_does_not_swallow_what_follows(self):
        self.assertEqual(redact("+1 555 123 4567 2024-01-01")[0], "[phone] 2024-01-01")

    def test_cards_need_the_luhn_checksum(self):
        self.assertEqual(redact("4111 1111 1111 1111; 4111-1111-1111-1111; 378282246310005; 5555555555554444"),
                         ("[card]; [card]; [card]; [card]", {"card": 4}))
        self.assertEqual(redact("4111 1111 1111 1112 and 0000 0000 0000 0000")[1], {})
        self.assertEqual(redact("Ann,4111111111111111,x")[0], "Ann,[card],x")
        self.assertEqual(redact("+49 30 1234567,4111 1111 1111 1111")[0], "[phone],[card]")

    def test_ibans_need_the_mod97_checksum(self):
        self.assertEqual(redact("pay DE89 3704 0044 0532 0130 00 or GB82WEST12345698765432 2024"),
                         ("pay [iban] or [iban] 2024", {"iban": 2}))
        self.assertEqual(redact("DE88 3704 0044 0532 0130 00")[1], {})
        self.assertTrue(pii.iban_ok("GB82WEST12345698765432"))
        self.assertTrue(pii.luhn_ok("79927398713"))
        self.assertFalse(pii.luhn_ok("79927398710"))

    def test_ordinary_numbers_stay(self):
        text = ("date 2024-01-05 12:30:45, ip 192.168.100.1, amount 1,234,567.89, id 1234567890123, "
                "order 01/2024 15, version 10.0.19045, pi 3.14159265358979, 2024-01-05T10:00:00+01:00")
        self.assertEqual(redact(text), (text, {}))

    def test_error_free_on_odd_text(self):
        for text in ("", "@", "+", "@" * 10_000, "1" * 10_000, "a." * 5000 + "@x", "+1 " * 3000):
            with self.subTest(text=text[:20]):
                redact(text)


class Config(unittest.TestCase):
    def test_kinds(self):
        self.assertEqual(redact("a@b.io 555-123-4567", kinds=["phone"]), ("a@b.io [phone]", {"phone": 1}))
        self.assertEqual(redact("a@b.io", kinds=[]), ("a@b.io", {}))

    def test_keep(self):
        text = "help@shop.com, Ann@Corp.example, bob@mail.com, 555-123-4567"
        self.assertEqual(redact(text, keep=["HELP@shop.com", "@corp.example", "555-123-4567"]),
                         ("help@shop.com, Ann@Corp.example, [email], 555-123-4567", {"email": 1}))

    def test_mistakes_are_errors(self):
        for config in ({"kind": ["email"]}, {"kinds": ["names"]}, {"kinds": "email"}, {"keep": [""]}, []):
            with self.subTest(config=config), self.assertRaises(ConfigError):
                Guard(config)


if __name__ == "__main__":
    unittest.main()
