#!/usr/bin/env python3
"""Posts payreview's Markdown review on a pull request, or updates the one it posted before.

A hidden marker line at the top of the comment lets later runs find it, so a pull request carries
one payreview comment that follows its latest push instead of a pile of them.

Usage (in GitHub Actions): upsert_comment.py REVIEW.md
Environment: GITHUB_TOKEN, GITHUB_REPOSITORY (owner/name), PR_NUMBER, GITHUB_API_URL (optional).
"""

import json
import os
import sys
import urllib.request

MARKER = "<!-- payreview:review -->"


def with_marker(body: str) -> str:
    """The comment body: the marker line, then the review."""
    return f"{MARKER}\n{body}"


def find_previous(comments: list) -> "int | None":
    """The id of the newest comment that payreview posted, if any."""
    ours = [c for c in comments if isinstance(c.get("body"), str) and c["body"].startswith(MARKER)]
    return ours[-1]["id"] if ours else None


def plan(comments: list, body: str) -> "tuple[str, int | None, str]":
    """What to do: ("update", id, body) when a previous comment exists, else ("create", None, body)."""
    previous = find_previous(comments)
    if previous is None:
        return ("create", None, with_marker(body))
    return ("update", previous, with_marker(body))


def _request(method: str, url: str, token: str, payload=None):
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Accept", "application/vnd.github+json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 (GitHub API URL)
        return json.loads(resp.read() or b"null")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        body = f.read()
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    repo = os.environ["GITHUB_REPOSITORY"]
    number = os.environ["PR_NUMBER"]
    token = os.environ["GITHUB_TOKEN"]
    comments, page = [], 1
    while True:
        batch = _request("GET", f"{api}/repos/{repo}/issues/{number}/comments?per_page=100&page={page}", token)
        comments.extend(batch or [])
        if not batch or len(batch) < 100:
            break
        page += 1
    action, comment_id, text = plan(comments, body)
    if action == "create":
        _request("POST", f"{api}/repos/{repo}/issues/{number}/comments", token, {"body": text})
    else:
        _request("PATCH", f"{api}/repos/{repo}/issues/comments/{comment_id}", token, {"body": text})
    print(f"payreview comment: {action}d")
    return 0


if __name__ == "__main__":
    sys.exit(main())
