"""Unit tests of csvstats.py on the host: python3 -m unittest discover -s plugins/lang/python/csv_stats"""

import json
import unittest

import csvstats
from csvstats import InputError

PEOPLE = "name,age,city,joined,active\nAnn,34,Oslo,2024-01-05,yes\nBob,29,Rome,2023-11-30,no\n" \
         "Cid,NA,Oslo,2025-02-01,yes\nDee,41,Paris,2022-06-15,yes\n"


def summary(**args):
    return json.loads(csvstats.summary(args))


def query(**args):
    return json.loads(csvstats.query({**args, "format": "json"}))


class Summary(unittest.TestCase):
    def test_types_and_statistics(self):
        s = summary(csv=PEOPLE)
        self.assertEqual(s["rows"], 4)
        cols = {c["name"]: c for c in s["columns"]}
        self.assertEqual([c["type"] for c in s["columns"]], ["text", "integer", "text", "date", "boolean"])
        age = cols["age"]
        self.assertEqual((age["missing"], age["min"], age["max"], age["median"], age["sum"]), (1, 29, 41, 34, 104))
        self.assertAlmostEqual(age["mean"], 34.6667, places=3)
        self.assertAlmostEqual(age["stdev"], 6.0277, places=3)
        self.assertEqual(cols["city"]["distinct"], 3)
        self.assertEqual(cols["city"]["top"][0], {"value": "Oslo", "count": 2})
        self.assertEqual((cols["joined"]["first"], cols["joined"]["last"]), ("2022-06-15", "2025-02-01"))

    def test_numbers_delimiters_and_ragged_rows(self):
        s = summary(csv="x;y\n1,500;10%\n2.5;20%\n3\n")
        self.assertEqual(s["columns"][0]["type"], "number")
        self.assertEqual(s["columns"][0]["max"], 1500)
        self.assertEqual(s["columns"][1]["missing"], 1)
        self.assertTrue(any("padded" in n for n in s["notes"]))
        self.assertTrue(any("';'" in n for n in s["notes"]))

    def test_every_cell_decides_the_type(self):
        # A leading 0 once stopped the integer check early (all() on falsy ints).
        s = summary(csv="a,b,c\n0,0,0\n1.5,x,2\n")
        self.assertEqual([c["type"] for c in s["columns"]], ["number", "text", "integer"])

    def test_integers_too_large_for_a_float_are_text(self):
        s = summary(csv="a,b\n" + "9" * 400 + ",1\n1,2\n")
        self.assertEqual([c["type"] for c in s["columns"]], ["text", "integer"])

    def test_distinct_values_are_capped(self):
        old = csvstats.MAX_DISTINCT, csvstats.CHUNK_CELLS
        csvstats.MAX_DISTINCT, csvstats.CHUNK_CELLS = 2000, 500  # 1000 per column, chunks of 250 rows
        try:
            cols = summary(csv="v,w\n" + "".join(f"x{i},y{i % 7}\n" for i in range(1500)))["columns"]
        finally:
            csvstats.MAX_DISTINCT, csvstats.CHUNK_CELLS = old
        self.assertEqual((cols[0]["distinct"], cols[0]["counted_rows"]), ("more than 1000", 1250))
        self.assertEqual(cols[0]["length"], {"min": 2, "max": 5})
        self.assertEqual(cols[1]["distinct"], 7)

    def test_delimiter_guess(self):
        for text, d in (("a\tb\n1\t2\n", "\t"), ("a|b|c\n1|2|3\n", "|"), ("a,b\nx;y,1\n", ","), ("a\n1\n", ",")):
            with self.subTest(text=text):
                self.assertEqual(csvstats.Table({"csv": text}).delimiter, d)
        self.assertEqual(summary(csv="a;b\n1;2\n", delimiter=",")["columns"][0]["name"], "a;b")

    def test_quoted_fields_bom_and_no_header(self):
        s = summary(csv='\ufeff"a, b",2\n"line\nbreak",3\n', has_header=False)
        self.assertEqual(s["rows"], 2)
        self.assertEqual(s["columns"][0]["name"], "column_1")
        self.assertEqual(s["columns"][1]["sum"], 5)

    def test_duplicate_and_blank_header_names(self):
        s = summary(csv="a,a,\n1,2,3\n")
        self.assertEqual([c["name"] for c in s["columns"]], ["a", "a_2", "column_3"])

    def test_bad_input(self):
        with self.assertRaisesRegex(InputError, r"line 3\): unexpected end of data"):
            csvstats.summary({"csv": 'a,b\n1,2\n"x\n'})
        for args in ({"csv": "  \n"}, {"csv": "a\n1", "delimiter": "ab"}, {"csv": 'a,b\n"x\n', "delimiter": ","}):
            with self.subTest(args=args), self.assertRaises(InputError):
                csvstats.summary(args)


class Query(unittest.TestCase):
    def test_where_select_sort_limit(self):
        q = query(csv=PEOPLE, where=[{"column": "age", "op": ">", "value": 30}], select=["name", "age"],
                  sort_by="age", descending=True)
        self.assertEqual(q["matched"], 2)
        self.assertEqual(q["rows"], [{"name": "Dee", "age": "41"}, {"name": "Ann", "age": "34"}])

    def test_text_ops_and_missing(self):
        self.assertEqual(query(csv=PEOPLE, where=[{"column": "CITY", "op": "starts_with", "value": "os"}])["matched"], 2)
        self.assertEqual(query(csv=PEOPLE, where=[{"column": "city", "op": "in", "value": ["Rome", "Paris"]}])["matched"], 2)
        self.assertEqual(query(csv=PEOPLE, where=[{"column": "age", "op": "empty"}])["rows"][0]["name"], "Cid")
        self.assertEqual(query(csv=PEOPLE, where=[{"column": "age", "op": "<", "value": 100}])["matched"], 3)
        self.assertEqual(query(csv=PEOPLE, where=[{"column": "active", "op": "=", "value": True}])["matched"], 0)
        self.assertEqual(query(csv=PEOPLE, where=[{"column": "active", "op": "=", "value": "yes"}])["matched"], 3)

    def test_sort_puts_missing_last_both_ways(self):
        for desc, names in ((False, ["Bob", "Ann", "Dee", "Cid"]), (True, ["Dee", "Ann", "Bob", "Cid"])):
            q = query(csv=PEOPLE, sort_by="age", descending=desc)
            self.assertEqual([r["name"] for r in q["rows"]], names)

    def test_limit_and_csv_output(self):
        out = csvstats.query({"csv": PEOPLE, "limit": 1, "select": ["city"]})
        self.assertEqual(out.splitlines()[:2], ["city", "Oslo"])
        self.assertIn("# 4 of 4 row(s) matched; rows 1 to 1 shown\n# 3 more matching row(s): raise limit or page with offset 1", out)

    def test_offset_pages(self):
        q = query(csv=PEOPLE, sort_by="name", offset=1, limit=2)
        self.assertEqual((q["matched"], q["offset"], q["returned"]), (4, 1, 2))
        self.assertEqual([r["name"] for r in q["rows"]], ["Bob", "Cid"])
        self.assertIn("page with offset 3", q["notes"][0])
        self.assertEqual(query(csv=PEOPLE, offset=9)["rows"], [])

    def test_result_size_is_capped(self):
        old = csvstats.MAX_RESULT_CHARS
        csvstats.MAX_RESULT_CHARS = 100
        try:
            q = query(csv=PEOPLE)
            out = csvstats.query({"csv": PEOPLE})
        finally:
            csvstats.MAX_RESULT_CHARS = old
        self.assertLess(q["returned"], 4)
        self.assertIn("stopped after", q["notes"][0])
        self.assertIn("# stopped after", out)

    def test_errors_name_the_columns(self):
        with self.assertRaisesRegex(InputError, "no column named 'agee'; the columns are: name, age"):
            csvstats.query({"csv": PEOPLE, "where": [{"column": "agee", "op": "=", "value": 1}]})
        with self.assertRaisesRegex(InputError, "needs a value"):
            csvstats.query({"csv": PEOPLE, "where": [{"column": "age", "op": "="}]})


class Schemas(unittest.TestCase):
    def test_schemas_are_json_objects(self):
        for name, _, schema in csvstats.schemas():
            schema = json.loads(schema)
            self.assertEqual((schema["type"], schema["additionalProperties"]), ("object", False), name)
            self.assertEqual(schema["required"], ["csv"], name)
        self.assertEqual(csvstats.TOOL_NAMES, {"csv_summary", "csv_query"})


if __name__ == "__main__":
    unittest.main()
