"""Tests of the comment-update logic (run by .ci/run with `python3 -m unittest`)."""

import unittest

import upsert_comment as uc


class PlanTest(unittest.TestCase):
    def test_creates_when_no_previous_comment(self):
        action, comment_id, body = uc.plan([{"id": 1, "body": "LGTM"}], "review")
        self.assertEqual((action, comment_id), ("create", None))
        self.assertTrue(body.startswith(uc.MARKER + "\n"))
        self.assertTrue(body.endswith("review"))

    def test_updates_the_newest_previous_comment(self):
        comments = [
            {"id": 1, "body": uc.MARKER + "\nold"},
            {"id": 2, "body": "a human"},
            {"id": 3, "body": uc.MARKER + "\nnewer"},
        ]
        self.assertEqual(uc.plan(comments, "new")[:2], ("update", 3))

    def test_a_quoted_marker_in_a_human_comment_is_not_ours(self):
        comments = [{"id": 7, "body": "> " + uc.MARKER + "\nwhy is this here?"}]
        self.assertEqual(uc.plan(comments, "x")[0], "create")

    def test_comments_without_a_body_are_skipped(self):
        self.assertIsNone(uc.find_previous([{"id": 1}, {"id": 2, "body": None}]))


if __name__ == "__main__":
    unittest.main()
