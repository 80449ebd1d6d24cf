"""What a broker URL shows when printed: never its password (issue 23's no-jetstream message)."""

from __future__ import annotations

import pytest

from vfadapters.broker.client import shown_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("nats://alice:s3cret@nats.example:4222", "nats://***@nats.example:4222"),
        ("tls://token@nats.example", "tls://***@nats.example"),
        ("nats://a:b@c@host:1", "nats://***@host:1"),  # the last @ ends the user part
    ],
)
def test_a_user_and_password_are_hidden(url: str, shown: str) -> None:
    assert shown_url(url) == shown
    assert "s3cret" not in shown_url(url)
